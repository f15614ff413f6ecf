//! Inline SVG plots for the HTML report: titled axes with round ticks (1-2-5 steps, powers of 2
//! for sizes, decades for log time axes), a legend below the plot area so no label is clipped,
//! and the marks the report needs: lines, dots, error bars, shaded bands and histogram bars.

use std::fmt::Write;

use crate::units::format_size;

/// How values map onto an axis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scale {
    Linear,
    /// Powers of two, ticks labelled as sizes (4 KiB, 1 MiB).
    Log2Size,
    /// Decades.
    Log10,
}

impl Scale {
    fn t(self, v: f64) -> f64 {
        match self {
            Scale::Linear => v,
            Scale::Log2Size => v.max(1e-300).log2(),
            Scale::Log10 => v.max(1e-300).log10(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Axis {
    pub title: String,
    pub scale: Scale,
    /// Range in data units; widened to round ticks.
    pub min: f64,
    pub max: f64,
}

impl Axis {
    pub fn new(title: impl Into<String>, scale: Scale, values: impl IntoIterator<Item = f64>) -> Axis {
        let (mut min, mut max) = values.into_iter().filter(|v| v.is_finite()).fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
        if min > max {
            (min, max) = (0.0, 1.0);
        }
        Axis { title: title.into(), scale, min, max }
    }

    /// Start the axis at zero (rates, counts).
    pub fn from_zero(mut self) -> Axis {
        self.min = self.min.min(0.0);
        self
    }

    /// Round tick values covering the range, and the range they span.
    fn ticks(&self) -> (f64, f64, Vec<(f64, String)>) {
        match self.scale {
            Scale::Linear => {
                let span = if self.max > self.min { self.max - self.min } else { self.max.abs().max(1.0) };
                let step = nice_step(span / 5.0);
                let lo = (self.min / step).floor() * step;
                let hi = (self.max / step).ceil() * step;
                let hi = if hi > lo { hi } else { lo + step };
                let count = ((hi - lo) / step).round() as usize;
                let ticks = (0..=count).map(|i| lo + step * i as f64).map(|v| (v, trim_number(v, step))).collect();
                (lo, hi, ticks)
            }
            Scale::Log2Size => {
                let lo = self.min.max(1.0).log2().floor();
                let hi = self.max.max(1.0).log2().ceil().max(lo + 1.0);
                let every = ((hi - lo) / 8.0).ceil().max(1.0);
                let ticks = (0..).map(|i| lo + every * i as f64).take_while(|e| *e <= hi).map(|e| (2f64.powf(e), format_size(2f64.powf(e) as u64))).collect();
                (2f64.powf(lo), 2f64.powf(hi), ticks)
            }
            Scale::Log10 => {
                // Ticks at 1, 2 and 5 times powers of ten; the range from the tick below the
                // smallest value to the one above the largest (whole decades when it spans many).
                let (min, max) = (self.min.max(1e-300), self.max.max(self.min.max(1e-300)));
                let decades = (max.log10().ceil() - min.log10().floor()).max(1.0);
                let mantissas: &[f64] = if decades > 3.0 { &[1.0] } else { &[1.0, 2.0, 5.0] };
                let candidates: Vec<f64> = (min.log10().floor() as i32..=max.log10().ceil() as i32 + 1)
                    .flat_map(|e| mantissas.iter().map(move |m| m * 10f64.powi(e)))
                    .collect();
                let lo = candidates.iter().copied().filter(|t| *t <= min).fold(candidates[0], f64::max);
                let hi = candidates.iter().copied().find(|t| *t >= max && *t > lo).unwrap_or(lo * 10.0);
                let ticks = candidates.into_iter().filter(|t| *t >= lo && *t <= hi).map(|t| (t, trim_number(t, t))).collect();
                (lo, hi, ticks)
            }
        }
    }
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    let raw = if raw > 0.0 && raw.is_finite() { raw } else { 1.0 };
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * power).find(|s| *s >= raw * 0.999).unwrap_or(10.0 * power)
}

/// A tick label with no more decimals than the step needs.
fn trim_number(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 { 0 } else { (-step.log10().floor()) as usize };
    format!("{v:.decimals$}")
}

/// What is drawn.
#[derive(Debug, Clone)]
pub enum Mark {
    Line { points: Vec<(f64, f64)>, dashed: bool, width: f64 },
    Dots { points: Vec<(f64, f64)> },
    /// Vertical bars from low to high at x (confidence intervals).
    ErrorBars { bars: Vec<(f64, f64, f64)> },
    /// The area between two curves over the same x values.
    Band { lower: Vec<(f64, f64)>, upper: Vec<(f64, f64)> },
    /// Histogram bars: (x from, x to, height).
    Bars { bars: Vec<(f64, f64, f64)> },
}

/// A mark with its colour and legend label (no legend entry when empty).
#[derive(Debug, Clone)]
pub struct Layer {
    pub mark: Mark,
    pub color: &'static str,
    pub label: String,
}

pub struct Plot {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub layers: Vec<Layer>,
    pub width: f64,
    pub height: f64,
}

/// Escape text for HTML and SVG.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

impl Plot {
    pub fn new(title: impl Into<String>, x: Axis, y: Axis) -> Plot {
        Plot { title: title.into(), x, y, layers: Vec::new(), width: 760.0, height: 320.0 }
    }

    pub fn small(mut self) -> Plot {
        (self.width, self.height) = (440.0, 220.0);
        self
    }

    pub fn add(&mut self, mark: Mark, color: &'static str, label: impl Into<String>) {
        self.layers.push(Layer { mark, color, label: label.into() });
    }

    pub fn render(&self) -> String {
        let (left, right, top, bottom) = (72.0, 16.0, 28.0, 46.0);
        let legend: Vec<&Layer> = self.layers.iter().filter(|l| !l.label.is_empty()).collect();
        let (w, plot_h) = (self.width, self.height);
        let h = plot_h + 18.0 * legend.len() as f64 + 6.0;
        let (x0, x1, xticks) = self.x.ticks();
        let (y0, y1, yticks) = self.y.ticks();
        let (tx0, tx1, ty0, ty1) = (self.x.scale.t(x0), self.x.scale.t(x1), self.y.scale.t(y0), self.y.scale.t(y1));
        let sx = |v: f64| left + (self.x.scale.t(v) - tx0) / (tx1 - tx0) * (w - left - right);
        let sy = |v: f64| top + (1.0 - (self.y.scale.t(v) - ty0) / (ty1 - ty0)) * (plot_h - top - bottom);
        let mut svg = String::new();
        let _ = write!(svg, r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" font-family="sans-serif">"#);
        let _ = write!(svg, r#"<title>{}</title><text x="{left}" y="17" font-size="13" font-weight="bold">{}</text>"#, escape(&self.title), escape(&self.title));
        let (bottom_y, right_x) = (plot_h - bottom, w - right);
        for (v, label) in &yticks {
            let y = sy(*v);
            let _ = write!(svg, r##"<line x1="{left}" y1="{y:.1}" x2="{right_x}" y2="{y:.1}" stroke="#e4e4e4"/><text x="{:.1}" y="{:.1}" font-size="10" text-anchor="end">{label}</text>"##, left - 5.0, y + 3.5);
        }
        for (v, label) in &xticks {
            let x = sx(*v);
            let _ = write!(svg, r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{bottom_y}" stroke="#f0f0f0"/><text x="{x:.1}" y="{:.1}" font-size="10" text-anchor="middle">{}</text>"##, bottom_y + 13.0, escape(label));
        }
        let _ = write!(svg, r#"<line x1="{left}" y1="{bottom_y}" x2="{right_x}" y2="{bottom_y}" stroke="black"/><line x1="{left}" y1="{top}" x2="{left}" y2="{bottom_y}" stroke="black"/>"#);
        let _ = write!(svg, r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">{}</text>"#, (left + right_x) / 2.0, bottom_y + 30.0, escape(&self.x.title));
        let mid = (top + bottom_y) / 2.0;
        let _ = write!(svg, r#"<text x="14" y="{mid:.1}" font-size="11" text-anchor="middle" transform="rotate(-90 14 {mid:.1})">{}</text>"#, escape(&self.y.title));
        for layer in &self.layers {
            svg += &self.mark(layer, &sx, &sy);
        }
        for (i, layer) in legend.iter().enumerate() {
            let y = plot_h + 12.0 + 18.0 * i as f64;
            let swatch = match &layer.mark {
                Mark::Band { .. } | Mark::Bars { .. } => format!(r#"<rect x="{left}" y="{:.1}" width="22" height="10" fill="{}" fill-opacity="0.25"/>"#, y - 5.0, layer.color),
                Mark::Line { dashed: true, .. } => format!(r##"<line x1="{left}" y1="{y}" x2="{}" y2="{y}" stroke="{}" stroke-width="2" stroke-dasharray="6 4"/>"##, left + 22.0, layer.color),
                _ => format!(r#"<line x1="{left}" y1="{y}" x2="{}" y2="{y}" stroke="{}" stroke-width="2"/><circle cx="{}" cy="{y}" r="3" fill="{}"/>"#, left + 22.0, layer.color, left + 11.0, layer.color),
            };
            let _ = write!(svg, r#"{swatch}<text x="{}" y="{:.1}" font-size="11">{}</text>"#, left + 28.0, y + 4.0, escape(&layer.label));
        }
        svg.push_str("</svg>");
        svg
    }

    fn mark(&self, layer: &Layer, sx: &dyn Fn(f64) -> f64, sy: &dyn Fn(f64) -> f64) -> String {
        let c = layer.color;
        let path = |points: &[(f64, f64)]| points.iter().map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y))).collect::<Vec<_>>().join(" ");
        match &layer.mark {
            Mark::Line { points, dashed, width } => {
                let dash = if *dashed { r#" stroke-dasharray="6 4""# } else { "" };
                format!(r#"<polyline fill="none" stroke="{c}" stroke-width="{width}"{dash} points="{}"/>"#, path(points))
            }
            Mark::Dots { points } => points.iter().map(|&(x, y)| format!(r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{c}"/>"#, sx(x), sy(y))).collect(),
            Mark::ErrorBars { bars } => bars
                .iter()
                .map(|&(x, lo, hi)| {
                    let (x, lo, hi) = (sx(x), sy(lo), sy(hi));
                    format!(r#"<path d="M{:.1},{lo:.1}H{:.1}M{x:.1},{lo:.1}V{hi:.1}M{:.1},{hi:.1}H{:.1}" stroke="{c}" fill="none"/>"#, x - 4.0, x + 4.0, x - 4.0, x + 4.0)
                })
                .collect(),
            Mark::Band { lower, upper } => {
                let ring: Vec<(f64, f64)> = lower.iter().copied().chain(upper.iter().rev().copied()).collect();
                format!(r#"<polygon fill="{c}" fill-opacity="0.15" stroke="none" points="{}"/>"#, path(&ring))
            }
            Mark::Bars { bars } => bars
                .iter()
                .map(|&(from, to, height)| {
                    let (x, y, base) = (sx(from), sy(height), sy(0.0));
                    format!(r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{c}" fill-opacity="0.6"/>"#, (sx(to) - x - 1.0).max(1.0), (base - y).max(0.0))
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(nice_step(173.0), 200.0);
        assert_eq!(nice_step(0.031), 0.05);
        let (lo, hi, ticks) = Axis::new("MB/s", Scale::Linear, [0.0, 861.9]).ticks();
        assert_eq!((lo, hi), (0.0, 1000.0));
        assert_eq!(ticks.iter().map(|t| t.1.as_str()).collect::<Vec<_>>(), ["0", "200", "400", "600", "800", "1000"]);
        let (_, _, sizes) = Axis::new("size", Scale::Log2Size, [4096.0, 16.0 * 1048576.0]).ticks();
        assert_eq!(sizes.first().unwrap().1, "4KiB");
        assert!(sizes.len() <= 9);
        let (_, _, decades) = Axis::new("µs", Scale::Log10, [3.2, 470.0]).ticks();
        assert_eq!(decades.iter().map(|t| t.1.as_str()).collect::<Vec<_>>(), ["2", "5", "10", "20", "50", "100", "200", "500"]);
        let (lo, hi, _) = Axis::new("µs", Scale::Log10, [7.06, 7.9]).ticks();
        assert_eq!((lo, hi), (5.0, 10.0));
        let (_, _, wide) = Axis::new("µs", Scale::Log10, [0.5, 20000.0]).ticks();
        assert_eq!(wide.iter().map(|t| t.1.as_str()).collect::<Vec<_>>(), ["0.1", "1", "10", "100", "1000", "10000", "100000"]);
    }
}
