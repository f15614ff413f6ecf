//! `pcieperf serve`: a Prometheus exporter of link health and of the last results of runs.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use crate::error::InvalidInput;
use crate::report::exporter::{self, Exporter, Sources};
use crate::report::http::{Request, Response, Status};
use crate::report::http_server::{self, Handler, Limits};
use crate::report::metrics::Exposition;

/// Serve link health (read fresh per scrape) and the newest results per target as Prometheus
/// metrics on http://ADDRESS/metrics.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  pcieperf serve --listen 127.0.0.1:9750
  pcieperf serve --listen 127.0.0.1:9750 --results /var/lib/pcieperf   # also the last runs' figures

Prometheus scrape config: `- job_name: pcieperf` with `static_configs: [{targets: ['127.0.0.1:9750']}]`.
Series and units: docs/metrics.md. Concurrent scrapes share one sysfs read (a result at most
0.1 s old is reused). Limits: GET and HEAD only (405 otherwise), request heads up to 8 KiB (431),
request bodies never read, 2 s idle / 5 s for a whole request head, at most 512 connections,
4 worker threads.
Exit codes: 2 when the address cannot be bound; otherwise the exporter runs until SIGINT
(Ctrl-C), SIGTERM or SIGHUP, stops within 0.1 s and exits 0 (stopping is its normal end).
Listening beyond loopback (0.0.0.0, ::, a public address) is allowed with a warning.")]
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
    // A service outlives its log reader: a closed stderr pipe is an error to ignore (see
    // `exporter::log`), not a SIGPIPE that ends it. One-shot commands keep the default, so
    // `pcieperf … | head` ends quietly.
    // SAFETY: setting a signal's disposition to SIG_IGN has no preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let sources = Sources { sysfs_root: args.sysfs_root.unwrap_or_else(crate::pci::sysfs::default_root), pci_ids: args.pci_ids, results_dir: args.results };
    // Fail before listening when the sources cannot be read at all.
    exporter::scrape(&sources)?;
    let listener = TcpListener::bind(args.listen).map_err(|e| InvalidInput::new(format!("cannot listen on {}: {e}", args.listen)))?;
    let address = listener.local_addr().map_or(args.listen, |a| a);
    exporter::log(&format!("pcieperf: serving http://{address}/metrics"));
    if !address.ip().to_canonical().is_loopback() {
        exporter::log(&format!("pcieperf: warning: listening on {address}, beyond loopback: anyone who can reach this host can read the link health and results served (no authentication, no TLS)"));
    }
    let exporter = Arc::new(Exporter::new(sources));
    let handler: Handler = Arc::new(move |request: &Request| answer(&exporter, request));
    http_server::serve(listener, &Limits::default(), handler, crate::cancel::flag())?;
    exporter::log("pcieperf: serve stopped by a signal");
    Ok(0)
}

fn answer(exporter: &Exporter, request: &Request) -> Response {
    let path = request.target.split_once('?').map_or(request.target.as_str(), |(path, _)| path);
    if path != "/metrics" {
        return Response::text(Status::NotFound, "metrics are at /metrics\n");
    }
    let format = Exposition::negotiate(request.accept.as_deref());
    match exporter.answer() {
        Ok(bodies) => Response { status: Status::Ok, content_type: format.content_type(), body: bodies.get(format) },
        Err(message) => Response::text(Status::Internal, &format!("{message}\n")),
    }
}
