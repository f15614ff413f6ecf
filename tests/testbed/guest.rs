//! One QEMU q35 guest: booted once, then many commands, each answered with its stdout, stderr
//! and exit code over a virtio-serial port; the monitor (QMP) alongside. A guest that does not
//! answer by a deadline is killed, and the error says so with the end of its console.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::initramfs::Image;
use super::qmp::Qmp;
use super::topology::Topology;

/// What one guest command printed and how it exited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
}

impl Output {
    /// The output of a command that must succeed; otherwise panic with everything it printed.
    #[track_caller]
    pub fn success(self) -> Output {
        assert_eq!(self.code, 0, "guest command failed (exit {}):\nstdout:\n{}\nstderr:\n{}", self.code, self.stdout, self.stderr);
        self
    }
}

pub struct Guest {
    pub topology: Topology,
    qemu: Child,
    dir: tempfile::TempDir,
    port: BufReader<UnixStream>,
    port_writer: UnixStream,
    pub qmp: Qmp,
    next_id: u64,
    /// Host wall time from starting QEMU to the guest's first prompt.
    pub boot_time: Duration,
    dead: Option<String>,
}

/// Default deadline of one guest command.
pub const COMMAND_DEADLINE: Duration = Duration::from_secs(120);

fn accept(listener: &UnixListener, qemu: &mut Child, deadline: Instant, what: &str) -> Result<UnixStream, String> {
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false).map_err(|e| e.to_string())?;
                return Ok(stream);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Err(format!("{what}: {e}")),
        }
        if let Ok(Some(status)) = qemu.try_wait() {
            return Err(format!("QEMU exited ({status}) before connecting its {what}"));
        }
        if Instant::now() > deadline {
            return Err(format!("QEMU did not connect its {what} in time"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Guest {
    /// Start QEMU with `topology` and wait until the guest serves commands.
    pub fn boot(topology: &Topology, image: &Image, deadline: Duration) -> Result<Guest, String> {
        let started = Instant::now();
        let dir = tempfile::Builder::new().prefix("pcieperf-testbed-").tempdir().map_err(|e| e.to_string())?;
        let cmd_socket = dir.path().join("cmd.sock");
        let qmp_socket = dir.path().join("qmp.sock");
        let cmd_listener = UnixListener::bind(&cmd_socket).map_err(|e| e.to_string())?;
        let qmp_listener = UnixListener::bind(&qmp_socket).map_err(|e| e.to_string())?;
        let mut append = "console=ttyS0 panic=-1 quiet".to_string();
        if topology.iommu {
            append += " intel_iommu=on";
        }
        // KVM fails on some VMs (and then hangs after the boot loader): TCG unless asked.
        let accel = std::env::var("PCIEPERF_TESTBED_ACCEL").unwrap_or_else(|_| "tcg".into());
        let mut qemu = Command::new("qemu-system-x86_64")
            .args(["-M", "q35", "-accel", &accel, "-m", "1024", "-smp", "1", "-nodefaults", "-no-reboot", "-display", "none"])
            .arg("-kernel")
            .arg(&image.kernel)
            .arg("-initrd")
            .arg(&image.initramfs)
            .args(["-append", &append])
            .arg("-serial")
            .arg(format!("file:{}", dir.path().join("console.log").display()))
            .arg("-chardev")
            .arg(format!("socket,id=cmd,path={}", cmd_socket.display()))
            .args(["-device", "virtio-serial-pci,id=vser,bus=pcie.0,addr=0x1", "-device", "virtserialport,bus=vser.0,chardev=cmd,name=pcieperf.cmd"])
            .arg("-chardev")
            .arg(format!("socket,id=qmp,path={}", qmp_socket.display()))
            .args(["-mon", "chardev=qmp,mode=control"])
            .args(topology.qemu_args(dir.path()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("qemu.stderr")).map_err(|e| e.to_string())?)
            .spawn()
            .map_err(|e| format!("cannot start qemu-system-x86_64: {e}"))?;
        let until = started + deadline;
        let connected = accept(&cmd_listener, &mut qemu, until, "command port").and_then(|port| {
            let qmp = accept(&qmp_listener, &mut qemu, until, "monitor")?;
            Ok((port, qmp))
        });
        let (port, qmp) = match connected {
            Ok(c) => c,
            Err(e) => {
                let _ = qemu.kill();
                let _ = qemu.wait();
                let stderr = std::fs::read_to_string(dir.path().join("qemu.stderr")).unwrap_or_default();
                return Err(format!("{e}\nQEMU stderr:\n{stderr}"));
            }
        };
        let port_writer = port.try_clone().map_err(|e| e.to_string())?;
        let mut guest = Guest {
            topology: topology.clone(),
            qemu,
            dir,
            port: BufReader::new(port),
            port_writer,
            qmp: Qmp::new(qmp)?,
            next_id: 0,
            boot_time: Duration::ZERO,
            dead: None,
        };
        let ready = guest.read_line(until, "boot")?;
        if ready.trim() != "@@@ READY" {
            return Err(guest.kill(&format!("unexpected first line from the guest: {ready:?}")));
        }
        guest.boot_time = started.elapsed();
        Ok(guest)
    }

    /// Host directory of this guest (console log, sockets, NVMe backing files).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn console(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("console.log")).unwrap_or_default()
    }

    /// Kill QEMU and describe why, with the end of the console.
    fn kill(&mut self, why: &str) -> String {
        let _ = self.qemu.kill();
        let _ = self.qemu.wait();
        let console = self.console();
        let tail: Vec<&str> = console.lines().rev().take(30).collect::<Vec<_>>().into_iter().rev().collect();
        let message = format!("{why}; QEMU killed. Last console lines:\n{}", tail.join("\n"));
        self.dead = Some(message.clone());
        message
    }

    fn remaining(&mut self, until: Instant, what: &str) -> Result<Duration, String> {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(self.kill(&format!("guest hung: no answer to {what} by its deadline")));
        }
        Ok(left)
    }

    fn read_line(&mut self, until: Instant, what: &str) -> Result<String, String> {
        let mut line = Vec::new();
        loop {
            let left = self.remaining(until, what)?;
            self.port.get_ref().set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
            match self.port.read_until(b'\n', &mut line) {
                Ok(0) => return Err(self.kill(&format!("the guest closed its command port during {what}"))),
                Ok(_) if line.ends_with(b"\n") => return Ok(String::from_utf8_lossy(&line).into_owned()),
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
                Err(e) => return Err(self.kill(&format!("command port: {e}"))),
            }
        }
    }

    fn read_bytes(&mut self, count: usize, until: Instant, what: &str) -> Result<Vec<u8>, String> {
        let mut bytes = vec![0u8; count];
        let mut done = 0;
        while done < count {
            let left = self.remaining(until, what)?;
            self.port.get_ref().set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
            match self.port.read(&mut bytes[done..]) {
                Ok(0) => return Err(self.kill(&format!("the guest closed its command port during {what}"))),
                Ok(n) => done += n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
                Err(e) => return Err(self.kill(&format!("command port: {e}"))),
            }
        }
        Ok(bytes)
    }

    /// Run a shell command line in the guest (as root, in /tmp) with the default deadline.
    pub fn run(&mut self, script: &str) -> Result<Output, String> {
        self.run_with_deadline(script, COMMAND_DEADLINE)
    }

    pub fn run_with_deadline(&mut self, script: &str, deadline: Duration) -> Result<Output, String> {
        if let Some(why) = &self.dead {
            return Err(format!("the guest is gone: {why}"));
        }
        assert!(!script.contains('\n'), "guest commands are one line: {script:?}");
        let until = Instant::now() + deadline;
        self.next_id += 1;
        let id = self.next_id;
        let what = format!("`{script}`");
        writeln!(self.port_writer, "{id} {script}").map_err(|e| format!("command port: {e}"))?;
        let header = loop {
            let line = self.read_line(until, &what)?;
            if let Some(rest) = line.strip_prefix("@@@ ") {
                break rest.split_whitespace().map(str::to_string).collect::<Vec<_>>();
            }
        };
        let number = |i: usize| header.get(i).and_then(|v| v.parse::<i64>().ok());
        let (Some(answer), Some(code), Some(out), Some(err)) = (number(0), number(1), number(2), number(3)) else {
            return Err(self.kill(&format!("malformed answer header {header:?}")));
        };
        if answer != id as i64 {
            return Err(self.kill(&format!("answer {answer} to request {id}")));
        }
        let stdout = self.read_bytes(out as usize, until, &what)?;
        let stderr = self.read_bytes(err as usize, until, &what)?;
        Ok(Output { stdout: String::from_utf8_lossy(&stdout).into_owned(), stderr: String::from_utf8_lossy(&stderr).into_owned(), code: code as i32 })
    }

    /// Run as the unprivileged user `tester` (uid 1000).
    pub fn run_unprivileged(&mut self, script: &str) -> Result<Output, String> {
        let quoted = script.replace('\'', r"'\''");
        self.run(&format!("su -s /bin/sh tester -c '{quoted}'"))
    }

    /// Start a command in the background; [`Guest::wait_background`] collects it.
    pub fn start_background(&mut self, name: &str, script: &str) -> Result<(), String> {
        let quoted = script.replace('\'', r"'\''");
        self.run(&format!("rm -f /tmp/{name}.rc; (sh -c '{quoted}' >/tmp/{name}.out 2>/tmp/{name}.err; echo $? >/tmp/{name}.rc) </dev/null >/dev/null 2>&1 &"))?
            .success();
        Ok(())
    }

    /// Wait until a background command ends (polling from the host), by a deadline.
    pub fn wait_background(&mut self, name: &str, deadline: Duration) -> Result<Output, String> {
        let until = Instant::now() + deadline;
        loop {
            let done = self.run(&format!("cat /tmp/{name}.rc 2>/dev/null"))?;
            if let Ok(code) = done.stdout.trim().parse::<i32>() {
                let stdout = self.run(&format!("cat /tmp/{name}.out"))?.stdout;
                let stderr = self.run(&format!("cat /tmp/{name}.err"))?.stdout;
                return Ok(Output { stdout, stderr, code });
            }
            if Instant::now() > until {
                return Err(self.kill(&format!("background command {name} did not end within {deadline:?}")));
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Where the NVMe controller `id`'s backing file is on the host.
    pub fn disk_image(&self, id: &str) -> PathBuf {
        self.dir.path().join(format!("{id}.img"))
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        let _ = self.qemu.kill();
        let _ = self.qemu.wait();
    }
}
