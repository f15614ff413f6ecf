//! `pcieperf serve`: a Prometheus exporter of link health and of the last results of runs.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use crate::error::InvalidInput;
use crate::report::exporter::{self, Sources};
use crate::report::metrics::OPENMETRICS_CONTENT_TYPE;

/// Serve link health (read fresh per scrape) and the newest results per target as Prometheus
/// metrics on http://ADDRESS/metrics.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  pcieperf serve --listen 127.0.0.1:9750
  pcieperf serve --listen 127.0.0.1:9750 --results /var/lib/pcieperf   # also the last runs' figures

Prometheus scrape config: `- job_name: pcieperf` with `static_configs: [{targets: ['127.0.0.1:9750']}]`.
Series and units: docs/metrics.md. Exit codes: 2 when the address cannot be bound; otherwise the
exporter runs until stopped (Ctrl-C).")]
pub struct ServeArgs {
    /// Address and port to listen on (port 0: any free port; the address is printed).
    #[arg(long, value_name = "ADDRESS:PORT", default_value = "127.0.0.1:9750")]
    pub listen: SocketAddr,
    /// Root of the sysfs tree to read (default /sys).
    #[arg(long, value_name = "DIR")]
    pub sysfs_root: Option<PathBuf>,
    /// pci.ids file for device names.
    #[arg(long, value_name = "PATH")]
    pub pci_ids: Option<PathBuf>,
    /// Directory of results documents (*.json): the newest per target is served.
    #[arg(long, value_name = "DIR")]
    pub results: Option<PathBuf>,
}

pub fn run(args: ServeArgs) -> anyhow::Result<i32> {
    let sources = Sources { sysfs_root: args.sysfs_root.unwrap_or_else(crate::pci::sysfs::default_root), pci_ids: args.pci_ids, results_dir: args.results };
    // Fail before listening when the sources cannot be read at all.
    exporter::scrape(&sources)?;
    let server = tiny_http::Server::http(args.listen).map_err(|e| InvalidInput::new(format!("cannot listen on {}: {e}", args.listen)))?;
    let address = server.server_addr().to_ip().map_or(args.listen.to_string(), |a| a.to_string());
    eprintln!("pcieperf: serving http://{address}/metrics");
    for request in server.incoming_requests() {
        let response = if request.url() == "/metrics" || request.url().starts_with("/metrics?") {
            match exporter::scrape(&sources) {
                Ok(body) => tiny_http::Response::from_string(body).with_header(header("Content-Type", OPENMETRICS_CONTENT_TYPE)),
                Err(e) => tiny_http::Response::from_string(format!("pcieperf: {}\n", super::describe(&e))).with_status_code(500),
            }
        } else {
            tiny_http::Response::from_string("pcieperf exporter: metrics are at /metrics\n").with_status_code(404)
        };
        let _ = request.respond(response);
    }
    Ok(0)
}

fn header(name: &str, value: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("a valid header")
}
