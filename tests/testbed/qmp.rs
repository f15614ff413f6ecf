//! QEMU's machine protocol (QMP) on a Unix socket: commands, human-monitor commands (AER
//! injection), and the events QEMU sends (a device's removal).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    /// Events received so far, in order.
    pub events: Vec<Value>,
}

impl Qmp {
    /// Read the greeting and leave negotiation mode.
    pub fn new(stream: UnixStream) -> Result<Qmp, String> {
        stream.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| e.to_string())?;
        let writer = stream.try_clone().map_err(|e| e.to_string())?;
        let mut qmp = Qmp { reader: BufReader::new(stream), writer, events: Vec::new() };
        let greeting = qmp.message()?;
        if greeting.get("QMP").is_none() {
            return Err(format!("unexpected QMP greeting: {greeting}"));
        }
        qmp.execute("qmp_capabilities", json!({}))?;
        Ok(qmp)
    }

    fn message(&mut self) -> Result<Value, String> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => Err("QEMU closed the monitor".into()),
            Ok(_) => serde_json::from_str(&line).map_err(|e| format!("bad QMP message {line:?}: {e}")),
            Err(e) => Err(format!("QMP: {e}")),
        }
    }

    /// Run a QMP command and return its `return` value; events seen meanwhile are kept.
    pub fn execute(&mut self, command: &str, arguments: Value) -> Result<Value, String> {
        let request = json!({ "execute": command, "arguments": arguments });
        writeln!(self.writer, "{request}").map_err(|e| format!("QMP: {e}"))?;
        loop {
            let message = self.message()?;
            if let Some(value) = message.get("return") {
                return Ok(value.clone());
            }
            if let Some(error) = message.get("error") {
                return Err(format!("QMP {command}: {}", error["desc"]));
            }
            self.events.push(message);
        }
    }

    /// A human-monitor (HMP) command such as `pcie_aer_inject_error -c rp0 BAD_TLP`; HMP
    /// reports failures as text, which is returned as an error.
    pub fn hmp(&mut self, command_line: &str) -> Result<String, String> {
        let out = self.execute("human-monitor-command", json!({ "command-line": command_line }))?;
        let text = out.as_str().unwrap_or_default().to_string();
        if text.to_lowercase().contains("error") || text.contains("invalid") {
            return Err(format!("{command_line}: {text}"));
        }
        Ok(text)
    }

    /// Wait until an event named `name` whose data matches `matches` arrives.
    pub fn wait_event(&mut self, name: &str, timeout: Duration, matches: impl Fn(&Value) -> bool) -> Result<Value, String> {
        let found = |events: &[Value]| events.iter().find(|e| e["event"] == name && matches(&e["data"])).cloned();
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Some(event) = found(&self.events) {
                return Ok(event);
            }
            // A cheap command collects whatever events arrived before its answer.
            self.execute("query-status", json!({}))?;
            if found(&self.events).is_none() {
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        Err(format!("no {name} event within {timeout:?}"))
    }
}
