//! The view table: every document pcieperf writes, in every format it has, is one line of
//! [`VIEWS`] — (document kind, format) → the function that renders it — as ripgrep's printer
//! crate owns every output format. Commands build a [`Document`] below the command line and ask
//! this table for the formats the user chose; `report` reads a saved document back through
//! [`read`] and the same table. A format a document lacks is one clear error (exit 2).
//!
//! A new output format is one file in `report/` plus one line here per document kind it
//! renders; a new procedure is a `bench/` (or `model/`, `pci/`) file building its document, a
//! [`Document`] variant, and its lines here.

use std::time::SystemTime;

use crate::bench::crosscheck::Crosscheck;
use crate::bench::demo_run::DemoDocument;
use crate::bench::inspect_run::InspectDocument;
use crate::bench::pio::PioRun;
use crate::bench::results::Results;
use crate::bench::stream::StreamDocument;
use crate::error::InvalidInput;
use crate::model::document::{ModelDocument, ModelTable};
use crate::units::RateUnit;

use super::inspect::Detail;
use super::{compare, csv, html, inspect, json, metrics, model, pio, text};

/// Every document a procedure returns.
#[derive(Debug, Clone)]
pub enum Document {
    /// `pcieperf model` and its subcommands (schema `pcieperf.model/2`).
    Model(ModelDocument),
    /// `pcieperf demo` (schema `pcieperf.demo/2`).
    Demo(DemoDocument),
    /// `pcieperf pio` (schema `pcieperf.pio/2`).
    Pio(PioRun),
    /// `pcieperf dma` and `run` (schema `pcieperf.results/3`).
    Results(Results),
    /// `pcieperf inspect` (schema `pcieperf.inspect/1`).
    Inspect(InspectDocument),
    /// `pcieperf crosscheck` (schema `pcieperf.crosscheck/1`).
    Crosscheck(Crosscheck),
    /// `pcieperf stream` (schema `pcieperf.stream/1`).
    Stream(StreamDocument),
}

/// The output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Csv,
    Html,
    Metrics,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Json => "JSON",
            Format::Csv => "CSV",
            Format::Html => "HTML",
            Format::Metrics => "metrics",
        }
    }
}

/// What a view may need besides the document.
#[derive(Debug, Clone, Copy)]
pub struct ViewOptions {
    /// Unit of printed rates (JSON is always MB/s).
    pub unit: RateUnit,
    /// When the document was written (the time of a metrics exposition).
    pub written: SystemTime,
    /// lspci's detail flags, for the inspection's text.
    pub detail: Detail,
    /// Only the points outside the tolerance (crosscheck's text).
    pub outside_only: bool,
    /// Characters a wide table may take (a terminal's width); `None`: every column.
    pub width: Option<usize>,
}

impl Default for ViewOptions {
    fn default() -> Self {
        ViewOptions { unit: RateUnit::MBps, written: SystemTime::now(), detail: Detail::default(), outside_only: false, width: super::output::table_width() }
    }
}

/// One line of the table.
pub struct View {
    pub kind: &'static str,
    pub format: Format,
    pub render: fn(&Document, &ViewOptions) -> Result<String, InvalidInput>,
}

/// `view!(KIND, FORMAT, PATTERN, OPTIONS => RENDER)`: a line of the table whose render function
/// takes the documents `PATTERN` matches (the kind's variant); `try` before KIND when RENDER
/// returns a `Result`; `model` before KIND to match one table of a model document.
macro_rules! view {
    ($kind:literal, $format:ident, $pattern:pat, $options:ident => $render:expr) => {
        view!(try $kind, $format, $pattern, $options => Ok($render))
    };
    (model $kind:literal, $format:ident, $table:ident($t:ident), $options:ident => $render:expr) => {
        view!($kind, $format, Model(ModelDocument { table: ModelTable::$table($t), .. }), $options => $render)
    };
    (try $kind:literal, $format:ident, $pattern:pat, $options:ident => $render:expr) => {
        View {
            kind: $kind,
            format: Format::$format,
            render: |document, $options| match document {
                $pattern => $render,
                #[allow(unreachable_patterns)]
                other => Err(InvalidInput::new(format!("the {} view of {} is not one of {}", Format::$format.name(), $kind, other.kind()))),
            },
        }
    };
}

use Document::{Crosscheck as Check, Demo, Inspect, Model, Pio, Results as Run, Stream};

/// Every (document kind, format) pcieperf renders.
pub static VIEWS: &[View] = &[
    view!(model "model sizes", Text, Sizes(t), o => model::text::sizes(t, o.unit)),
    view!(model "model sizes", Csv, Sizes(t), o => model::csv::sizes(t, o.unit)),
    view!("model sizes", Json, Model(d), _o => model::json(d)),
    view!(model "model explain", Text, Explain(t), o => model::text::explain(t, o.unit)),
    view!(model "model explain", Csv, Explain(t), o => model::csv::explain(t, o.unit)),
    view!("model explain", Json, Model(d), _o => model::json(d)),
    view!(model "model fit", Text, Fit(t), _o => model::text::fit(t)),
    view!("model fit", Json, Model(d), _o => model::json(d)),
    view!(model "model mmio", Text, Mmio(t), o => model::text::mmio(t, o.unit)),
    view!(model "model mmio", Csv, Mmio(t), o => model::csv::mmio(t, o.unit)),
    view!("model mmio", Json, Model(d), _o => model::json(d)),
    view!(model "model wc", Text, WriteCombining(t), o => model::text::write_combining(t, o.unit)),
    view!(model "model wc", Csv, WriteCombining(t), o => model::csv::write_combining(t, o.unit)),
    view!("model wc", Json, Model(d), _o => model::json(d)),
    view!(model "model status", Text, Status(t), _o => model::text::status(t)),
    view!("model status", Json, Model(d), _o => model::json(d)),
    view!(model "model message", Text, Message(t), o => model::text::message(t, o.unit)),
    view!(model "model message", Csv, Message(t), o => model::csv::message(t, o.unit)),
    view!("model message", Json, Model(d), _o => model::json(d)),
    view!("demo", Text, Demo(d), _o => super::demo::text(d)),
    view!("demo", Json, Demo(d), _o => super::demo::json(d)),
    view!("pio", Text, Pio(r), _o => pio::text(r)),
    view!("pio", Json, Pio(r), _o => pio::json(r)),
    view!("pio", Csv, Pio(r), _o => pio::csv(r)),
    view!("pio", Html, Pio(r), _o => pio::html(r)),
    view!("results", Text, Run(r), o => text::render_within(r, o.width)),
    view!("results", Json, Run(r), _o => json::to_string(r)),
    view!("results", Csv, Run(r), _o => csv::render(r)),
    view!("results", Html, Run(r), _o => html::render(r)),
    view!("results", Metrics, Run(r), o => metrics::render(r, o.written)),
    view!("inspect", Text, Inspect(d), o => inspect::text(d, o.detail)),
    view!("inspect", Json, Inspect(d), _o => inspect::json(d)),
    view!("inspect", Metrics, Inspect(d), o => metrics::inspection(&d.inspection, o.written)),
    view!("crosscheck", Text, Check(c), o => super::crosscheck::text(c, o.outside_only)),
    view!("crosscheck", Json, Check(c), _o => serde_json::to_string_pretty(c).expect("crosscheck documents serialise: plain data") + "\n"),
    view!("crosscheck", Csv, Check(c), _o => super::crosscheck::csv(c)),
    view!("stream", Text, Stream(d), _o => super::stream::text(d)),
    view!("stream", Json, Stream(d), _o => super::stream::json(d)),
    view!("stream", Csv, Stream(d), _o => super::stream::csv(d)),
    view!("stream", Html, Stream(d), _o => super::stream::html(d)),
    view!("stream", Metrics, Stream(d), o => super::stream::metrics(d, o.written)),
];

impl Document {
    /// The kind the view table knows it by.
    pub fn kind(&self) -> &'static str {
        match self {
            Model(d) => match d.table {
                ModelTable::Sizes(_) => "model sizes",
                ModelTable::Explain(_) => "model explain",
                ModelTable::Fit(_) => "model fit",
                ModelTable::Mmio(_) => "model mmio",
                ModelTable::WriteCombining(_) => "model wc",
                ModelTable::Status(_) => "model status",
                ModelTable::Message(_) => "model message",
            },
            Demo(_) => "demo",
            Pio(_) => "pio",
            Run(_) => "results",
            Inspect(_) => "inspect",
            Check(_) => "crosscheck",
            Stream(_) => "stream",
        }
    }

    /// "co-simulated", "simulated" or "measured", for documents that carry the word.
    pub fn label(&self) -> Option<&'static str> {
        match self {
            Run(r) => Some(r.label()),
            Stream(d) => Some(super::stream::label(d)),
            _ => None,
        }
    }

    /// The results document, when this is one.
    pub fn as_results(&self) -> Option<&Results> {
        match self {
            Run(r) => Some(r),
            _ => None,
        }
    }

    /// The formats this document has, in the table's order.
    pub fn formats(&self) -> Vec<Format> {
        VIEWS.iter().filter(|v| v.kind == self.kind()).map(|v| v.format).collect()
    }
}

/// The document in `format`, or one line saying which formats it has.
pub fn render(document: &Document, format: Format, options: &ViewOptions) -> Result<String, InvalidInput> {
    match VIEWS.iter().find(|v| v.kind == document.kind() && v.format == format) {
        Some(view) => (view.render)(document, options),
        None => {
            let has: Vec<&str> = document.formats().iter().map(|f| f.name()).collect();
            Err(InvalidInput::new(format!("a {} document has no {} view (it has {})", document.kind(), format.name(), has.join(", "))))
        }
    }
}

/// One line of the comparison table: two documents of one kind side by side, named by their
/// files.
pub struct ComparisonView {
    pub kind: &'static str,
    pub format: Format,
    pub render: fn(&Document, &Document, (&str, &str)) -> Option<String>,
}

/// `comparison!(KIND, FORMAT, VARIANT, |A, B, NAMES| RENDER)`.
macro_rules! comparison {
    ($kind:literal, $format:ident, $variant:ident, |$a:ident, $b:ident, $names:ident| $render:expr) => {
        ComparisonView {
            kind: $kind,
            format: Format::$format,
            render: |a, b, $names| match (a, b) {
                ($variant($a), $variant($b)) => Some($render),
                _ => None,
            },
        }
    };
}

/// Every (document kind, format) pcieperf compares (`report A B`).
pub static COMPARISONS: &[ComparisonView] = &[
    comparison!("results", Text, Run, |a, b, names| compare::render(a, b, names)),
    comparison!("results", Json, Run, |a, b, names| {
        serde_json::to_string_pretty(&compare::compare(a, b, names)).expect("comparisons serialise: plain data") + "\n"
    }),
    comparison!("results", Html, Run, |a, b, names| html::render_comparison(&compare::compare(a, b, names))),
    comparison!("pio", Text, Pio, |a, b, names| pio::compare(a, b, names)),
];

/// Documents `a` and `b` side by side in `format`, or one line saying why not.
pub fn compare(a: &Document, b: &Document, format: Format, names: (&str, &str)) -> Result<String, InvalidInput> {
    if a.kind() != b.kind() {
        return Err(InvalidInput::new(format!("cannot compare a {} document ({}) with a {} document ({})", a.kind(), names.0, b.kind(), names.1)));
    }
    let views = || COMPARISONS.iter().filter(|v| v.kind == a.kind());
    match views().find(|v| v.format == format).and_then(|view| (view.render)(a, b, names)) {
        Some(text) => Ok(text),
        None => {
            let has: Vec<&str> = views().map(|v| v.format.name()).collect();
            Err(InvalidInput::new(format!("two {} documents have no {} comparison (they have {})", a.kind(), format.name(), has.join(", "))))
        }
    }
}

/// A saved document (results, pio, crosscheck), by the schema it names; a text naming no schema
/// pcieperf reads is refused as a results document would be (the message says which schema is
/// expected).
pub fn read(text: &str) -> Result<Document, InvalidInput> {
    super::saved::from_reader(text.as_bytes(), super::saved::Accept::Saved)
}

/// Print the document in `format` on standard output.
pub fn print(document: &Document, format: Format, options: &ViewOptions) -> anyhow::Result<()> {
    super::output::write(std::path::Path::new("-"), &render(document, format, options)?)
}
