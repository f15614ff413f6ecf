//! The `pcieperf model` procedures as documents: each table the command prints (sizes, explain,
//! fit, mmio, write combining, status, message) is built here, checked and typed, and rendered
//! by `report::model`. Rates are MB/s (10^6 B/s); views convert to the unit asked for.

use serde::Serialize;

use super::{
    bidir, explain, message, mmio, read, status, transfer, write, write_combining, Flow, Limit, LinkParams, Span, Throughput,
};
use crate::error::InvalidInput;

/// Version of the JSON documents `pcieperf model` writes (documented in docs/theory.md).
pub const SCHEMA: &str = "pcieperf.model/2";

/// The unit every rate of a model document is in.
const UNIT: &str = "MB/s = 10^6 bytes/s";

/// Most accesses `model mmio --record` counts: far beyond any trace, and small enough that
/// bytes and times stay exact.
pub const MAX_RECORD_ACCESSES: u64 = 1_000_000_000;

/// One model document: the schema and one table.
#[derive(Debug, Clone, Serialize)]
pub struct ModelDocument {
    pub schema: &'static str,
    #[serde(flatten)]
    pub table: ModelTable,
}

/// The tables, named in the document's `kind`.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ModelTable {
    Sizes(SizesTable),
    Explain(ExplainTable),
    Fit(FitTable),
    Mmio(MmioTable),
    WriteCombining(WcTable),
    Status(StatusTable),
    Message(MessageTable),
}

/// The conditions of every table about a link: the link and every model input.
#[derive(Debug, Clone, Serialize)]
pub struct LinkHeader {
    pub unit: &'static str,
    /// The link as people write it ("Gen3 x8").
    pub link: String,
    /// Whether the link was the default rather than chosen.
    pub default_link: bool,
    pub params: LinkParams,
}

impl LinkHeader {
    pub fn new(params: LinkParams, default_link: bool) -> Self {
        LinkHeader { unit: UNIT, link: params.link.to_string(), default_link, params }
    }
}

/// Writes, reads and both at once over transfer sizes.
#[derive(Debug, Clone, Serialize)]
pub struct SizesTable {
    #[serde(flatten)]
    pub header: LinkHeader,
    #[serde(rename = "encoded_MBps")]
    pub encoded_mbps: f64,
    /// The rate read latency × tags allows; null when unbounded.
    #[serde(rename = "read_latency_bound_MBps")]
    pub read_latency_bound_mbps: Option<f64>,
    pub rows: Vec<SizeRow>,
}

/// Writes and reads of one size: rates and shares of the rate after encoding.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct WritesReads {
    #[serde(rename = "write_MBps")]
    pub write_mbps: f64,
    pub write_efficiency: f64,
    #[serde(rename = "read_MBps")]
    pub read_mbps: f64,
    pub read_efficiency: f64,
}

impl WritesReads {
    fn of(write: Throughput, read: Throughput) -> Self {
        WritesReads { write_mbps: write.mbps, write_efficiency: write.efficiency, read_mbps: read.mbps, read_efficiency: read.efficiency }
    }
}

/// One transfer size: writes, reads, both at once, and what each puts on its opposite direction.
#[derive(Debug, Clone, Serialize)]
pub struct SizeRow {
    pub size_bytes: u64,
    #[serde(flatten)]
    pub rates: WritesReads,
    #[serde(rename = "bidir_write_MBps")]
    pub bidir_write_mbps: f64,
    #[serde(rename = "bidir_read_MBps")]
    pub bidir_read_mbps: f64,
    #[serde(rename = "bidir_total_MBps")]
    pub bidir_total_mbps: f64,
    /// Link bytes the writes put on the opposite direction (DLLPs) per time.
    #[serde(rename = "write_opposite_direction_MBps")]
    pub write_opposite_mbps: f64,
    /// Link bytes the reads put on the request direction (requests, ACKs) per time.
    #[serde(rename = "read_request_direction_MBps")]
    pub read_opposite_mbps: f64,
    pub limit: SizeLimits,
}

/// What bounds each figure of a [`SizeRow`].
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SizeLimits {
    pub write: Limit,
    pub read: Limit,
    pub bidir_write: Limit,
    pub bidir_read: Limit,
}

/// The waterfall of one write and one read.
#[derive(Debug, Clone, Serialize)]
pub struct ExplainTable {
    #[serde(flatten)]
    pub header: LinkHeader,
    pub software: explain::Software,
    pub waterfalls: Vec<explain::Waterfall>,
}

/// T(N) = N/(B·f) + m fitted to measured points (document 002).
#[derive(Debug, Clone, Serialize)]
pub struct FitTable {
    pub unit: &'static str,
    pub model: &'static str,
    #[serde(rename = "bus_MBps")]
    pub bus_mbps: f64,
    pub f: f64,
    pub m_us: f64,
    #[serde(rename = "asymptotic_MBps")]
    pub asymptotic_mbps: f64,
    pub n_half_bytes: f64,
    pub points: Vec<FitPoint>,
    pub predictions: Vec<Prediction>,
}

/// A measured point and how far the fit is from it (a fraction).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct FitPoint {
    pub size_bytes: u64,
    #[serde(rename = "MBps")]
    pub mbps: f64,
    pub residual: f64,
}

/// The fit's rate at a size.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Prediction {
    pub size_bytes: u64,
    #[serde(rename = "MBps")]
    pub mbps: f64,
}

/// Single CPU accesses, and optionally records of many.
#[derive(Debug, Clone, Serialize)]
pub struct MmioTable {
    #[serde(flatten)]
    pub header: LinkHeader,
    pub rows: Vec<MmioRow>,
    pub record: Option<mmio::WriteRecord>,
    pub read_record: Option<mmio::ReadRecord>,
}

/// One access size: back-to-back writes, and reads one at a time.
#[derive(Debug, Clone, Serialize)]
pub struct MmioRow {
    pub size_bytes: u64,
    #[serde(flatten)]
    pub rates: WritesReads,
    pub limit: PairLimits,
}

/// What bounds the writes and the reads.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PairLimits {
    pub write: Limit,
    pub read: Limit,
}

/// Sequential writes through write-combining buffers.
#[derive(Debug, Clone, Serialize)]
pub struct WcTable {
    #[serde(flatten)]
    pub header: LinkHeader,
    pub rows: Vec<write_combining::WcRow>,
}

/// The performance-demo PCI-Status word, decoded.
#[derive(Debug, Clone, Serialize)]
pub struct StatusTable {
    pub status: status::StatusWord,
}

/// Throughput after a framework's per-message overhead.
#[derive(Debug, Clone, Serialize)]
pub struct MessageTable {
    #[serde(flatten)]
    pub header: LinkHeader,
    #[serde(rename = "encoded_MBps")]
    pub encoded_mbps: f64,
    /// Share of the encoded rate TLP and link overhead take.
    pub link_overhead: f64,
    pub result: message::MessageOverhead,
    #[serde(rename = "Gbps")]
    pub gbps: f64,
}

fn document(table: ModelTable) -> ModelDocument {
    ModelDocument { schema: SCHEMA, table }
}

/// Link bytes per time a flow puts on its opposite direction, MB/s.
fn opposite_mbps(flow: &Flow) -> f64 {
    crate::units::mbps(flow.opposite.total_bytes(), flow.duration_ns)
}

/// `pcieperf model`: one row per size.
pub fn sizes(header: LinkHeader, sizes: &[u64]) -> ModelDocument {
    let params = &header.params;
    let rows = sizes
        .iter()
        .map(|&size_bytes| {
            let writes = write::write_flow(params, size_bytes, Span::Steady);
            let reads = read::read_flow(params, size_bytes, Span::Steady);
            let both = bidir::bidirectional(params, size_bytes);
            let (w, r) = (writes.throughput, reads.throughput);
            SizeRow {
                size_bytes,
                rates: WritesReads::of(w, r),
                bidir_write_mbps: both.write.mbps,
                bidir_read_mbps: both.read.mbps,
                bidir_total_mbps: both.total_mbps(),
                write_opposite_mbps: opposite_mbps(&writes),
                read_opposite_mbps: opposite_mbps(&reads),
                limit: SizeLimits { write: w.limit, read: r.limit, bidir_write: both.write.limit, bidir_read: both.read.limit },
            }
        })
        .collect();
    let bound = read::latency_bound_mbps(params);
    document(ModelTable::Sizes(SizesTable {
        encoded_mbps: params.link.encoded_mbps(),
        read_latency_bound_mbps: bound.is_finite().then_some(bound),
        rows,
        header,
    }))
}

/// `pcieperf model --explain SIZE`: the waterfalls of one write and one read.
pub fn explain(header: LinkHeader, size_bytes: u64, software: explain::Software) -> Result<ModelDocument, InvalidInput> {
    if size_bytes == 0 {
        return Err(InvalidInput::new("a size of 0 bytes moves nothing: --explain needs at least 1 byte"));
    }
    let per_transfer_us = software.per_transfer_us;
    if !(per_transfer_us >= 0.0 && per_transfer_us.is_finite()) {
        return Err(InvalidInput::new(format!("invalid software overhead {per_transfer_us} µs: must be 0 or more")));
    }
    let params = &header.params;
    let waterfalls = vec![explain::write_waterfall(params, size_bytes, software), explain::read_waterfall(params, size_bytes, software)];
    Ok(document(ModelTable::Explain(ExplainTable { header, software, waterfalls })))
}

/// `pcieperf model fit`: the fit through measured (size in bytes, MB/s) points, and its rate at
/// the sizes to predict.
pub fn fit(bus_mbps: f64, points: &[(f64, f64)], predict: &[u64]) -> Result<ModelDocument, InvalidInput> {
    let fitted = transfer::fit(bus_mbps, points)?;
    let residuals = transfer::residuals(&fitted, points);
    let points = points
        .iter()
        .zip(residuals)
        .map(|(&(size, mbps), residual)| FitPoint { size_bytes: size as u64, mbps, residual })
        .collect();
    let predictions = predict.iter().map(|&size_bytes| Prediction { size_bytes, mbps: fitted.rate_mbps(size_bytes as f64) }).collect();
    Ok(document(ModelTable::Fit(FitTable {
        unit: UNIT,
        model: "T(N) = N/(B·f) + m",
        bus_mbps: fitted.bus_mbps,
        f: fitted.f,
        m_us: fitted.m_us,
        asymptotic_mbps: fitted.asymptotic_mbps(),
        n_half_bytes: fitted.n_half_bytes(),
        points,
        predictions,
    })))
}

/// `pcieperf model mmio`: single accesses of every size, and with `record` = (access bytes,
/// count) the records of that many writes and reads.
pub fn mmio(header: LinkHeader, record: Option<(u64, u64)>) -> Result<ModelDocument, InvalidInput> {
    let params = &header.params;
    let (record, read_record) = match record {
        Some((_, 0)) => return Err(InvalidInput::new("--record needs at least 1 access")),
        Some((_, count)) if count > MAX_RECORD_ACCESSES => {
            return Err(InvalidInput::new(format!("--record {count}: at most {MAX_RECORD_ACCESSES} accesses (10^9)")))
        }
        Some((access, _)) if !(1..=4096).contains(&access) => {
            return Err(InvalidInput::new(format!("invalid access size {access}: allowed 1 to 4096 bytes")))
        }
        Some((access, count)) => (Some(mmio::write_record(params, access, count)), Some(mmio::read_record(params, access, count))),
        None => (None, None),
    };
    let rows = mmio::ACCESS_SIZES
        .iter()
        .map(|&n| {
            let single = mmio::single_access(params, n);
            MmioRow {
                size_bytes: single.access_bytes,
                rates: WritesReads::of(single.write, single.read),
                limit: PairLimits { write: single.write.limit, read: single.read.limit },
            }
        })
        .collect();
    Ok(document(ModelTable::Mmio(MmioTable { header, rows, record, read_record })))
}

/// `pcieperf model wc`: sequential writes of each size through write-combining buffers.
pub fn write_combining(header: LinkHeader, sizes: &[u64]) -> Result<ModelDocument, InvalidInput> {
    if let Some(&too_big) = sizes.iter().find(|&&s| s > 1 << 20) {
        return Err(InvalidInput::new(format!("write-combining size {too_big} too large: allowed 1 byte to 1 MiB")));
    }
    let rows = sizes.iter().map(|&s| write_combining::row(&header.params, s)).collect();
    Ok(document(ModelTable::WriteCombining(WcTable { header, rows })))
}

/// `pcieperf model status WORD`.
pub fn status(raw: u32) -> ModelDocument {
    document(ModelTable::Status(StatusTable { status: status::decode_status(raw) }))
}

/// `pcieperf model message`: the link's steady write rate after per-message overhead.
pub fn message(header: LinkHeader, message_bytes: u64, overhead_bytes: u64) -> Result<ModelDocument, InvalidInput> {
    if message_bytes == 0 {
        return Err(InvalidInput::new("invalid --message-bytes 0: a message needs at least 1 byte of payload"));
    }
    for (flag, bytes) in [("--message-bytes", message_bytes), ("--overhead-bytes", overhead_bytes)] {
        if bytes > crate::units::MAX_SIZE_BYTES {
            return Err(InvalidInput::new(format!("invalid {flag} {bytes}: at most 1 TiB ({} bytes)", crate::units::MAX_SIZE_BYTES)));
        }
    }
    let result = message::message_throughput(&header.params, message_bytes, overhead_bytes);
    let encoded_mbps = header.params.link.encoded_mbps();
    Ok(document(ModelTable::Message(MessageTable {
        encoded_mbps,
        link_overhead: 1.0 - result.link_mbps / encoded_mbps,
        gbps: result.gbps(),
        result,
        header,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> LinkHeader {
        LinkHeader::new(LinkParams::typical("gen3x8".parse().unwrap()), true)
    }

    #[test]
    fn documents_name_their_schema_and_kind_in_snake_case() {
        let json = serde_json::to_value(sizes(header(), &[64, 4096])).unwrap();
        assert_eq!(json["schema"], SCHEMA);
        assert_eq!(json["kind"], "sizes");
        assert_eq!(json["rows"].as_array().unwrap().len(), 2);
        assert_eq!(json["params"]["accounting"], "wire_accurate");
        assert_eq!(json["params"]["header"], "3dw");
        assert_eq!(json["params"]["link"]["generation"], "gen3");
        let wc = serde_json::to_value(write_combining(header(), &[64]).unwrap()).unwrap();
        assert_eq!(wc["kind"], "write_combining");
    }

    #[test]
    fn bad_values_are_refused_before_anything_is_computed() {
        assert!(explain(header(), 0, explain::Software::default()).is_err());
        assert!(mmio(header(), Some((4, 0))).is_err());
        assert!(mmio(header(), Some((0, 10))).is_err());
        assert!(write_combining(header(), &[2 << 20]).is_err());
        assert!(message(header(), 0, 24).is_err());
        let records = mmio(header(), Some((4, 100))).unwrap();
        assert!(matches!(&records.table, ModelTable::Mmio(t) if t.record.is_some() && t.read_record.is_some()));
    }
}
