//! Plain aligned text tables for the terminal: the one table renderer every command uses.

/// Column alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A table built row by row and rendered with columns padded to their widest cell.
#[derive(Debug, Clone, Default)]
pub struct Table {
    headers: Vec<String>,
    aligns: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// Columns given as (header, alignment).
    pub fn new(columns: &[(&str, Align)]) -> Self {
        Table {
            headers: columns.iter().map(|(h, _)| h.to_string()).collect(),
            aligns: columns.iter().map(|(_, a)| *a).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) -> &mut Self {
        debug_assert_eq!(cells.len(), self.headers.len(), "row width must match the header");
        self.rows.push(cells);
        self
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Render with two spaces between columns and a rule under the header.
    pub fn render(&self) -> String {
        self.render_columns(&(0..self.headers.len()).collect::<Vec<_>>())
    }

    /// Render within `width` characters: columns are left out, the highest `rank` first (one
    /// rank per column, 0 = most useful), until the table fits or two columns remain. Returns the
    /// text and how many columns were left out.
    pub fn render_fitting(&self, width: usize, rank: &[usize]) -> (String, usize) {
        let widths = self.widths();
        let mut shown: Vec<usize> = (0..self.headers.len()).collect();
        let total = |shown: &[usize]| shown.iter().map(|&c| widths[c]).sum::<usize>() + 2 * shown.len().saturating_sub(1);
        while total(&shown) > width && shown.len() > 2 {
            let Some(drop) = shown.iter().copied().max_by_key(|&c| rank.get(c).copied().unwrap_or(usize::MAX)) else { break };
            shown.retain(|&c| c != drop);
        }
        (self.render_columns(&shown), self.headers.len() - shown.len())
    }

    /// The widest cell of each column, header included.
    fn widths(&self) -> Vec<usize> {
        (0..self.headers.len())
            .map(|c| std::iter::once(&self.headers[c]).chain(self.rows.iter().map(|r| &r[c])).map(|s| s.chars().count()).max().unwrap_or(0))
            .collect()
    }

    /// The table of only the columns `shown`, in their order.
    fn render_columns(&self, shown: &[usize]) -> String {
        let widths = self.widths();
        let line = |cells: &[String]| {
            let padded: Vec<String> = shown.iter().map(|&c| padded(&cells[c], widths[c], self.aligns[c])).collect();
            padded.join("  ").trim_end().to_string()
        };
        let mut out = line(&self.headers);
        out.push('\n');
        out.push_str(&shown.iter().map(|&c| "-".repeat(widths[c])).collect::<Vec<_>>().join("  "));
        out.push('\n');
        for row in &self.rows {
            out.push_str(&line(row));
            out.push('\n');
        }
        out
    }
}

/// `cell` padded with spaces to `width` characters. By hand, not `format!("{cell:>w$}")`: a
/// format width above 65,535 panics, and a cell listing thousands of sizes can be that wide.
fn padded(cell: &str, width: usize, align: Align) -> String {
    let fill = " ".repeat(width.saturating_sub(cell.chars().count()));
    match align {
        Align::Left => format!("{cell}{fill}"),
        Align::Right => format!("{fill}{cell}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_padded_to_the_widest_cell() {
        let mut table = Table::new(&[("size", Align::Right), ("limit", Align::Left)]);
        table.row(vec!["4096".into(), "link".into()]);
        table.row(vec!["64".into(), "latency".into()]);
        assert_eq!(table.render(), "size  limit\n----  -------\n4096  link\n  64  latency\n");
    }

    #[test]
    fn columns_ranked_least_useful_go_first_until_the_table_fits() {
        let mut table = Table::new(&[("mode", Align::Left), ("size", Align::Right), ("detail", Align::Left), ("rate", Align::Right)]);
        table.row(vec!["d2h".into(), "4096".into(), "a long explanation".into(), "812.5".into()]);
        let (all, left_out) = table.render_fitting(200, &[0, 1, 3, 2]);
        assert_eq!((all, left_out), (table.render(), 0));
        let (narrow, left_out) = table.render_fitting(20, &[0, 1, 3, 2]);
        assert_eq!(left_out, 1);
        assert_eq!(narrow, "mode  size   rate\n----  ----  -----\nd2h   4096  812.5\n");
        let (narrowest, left_out) = table.render_fitting(1, &[0, 1, 3, 2]);
        assert_eq!(left_out, 2, "two columns always stay: {narrowest}");
    }

    #[test]
    fn a_cell_wider_than_a_format_width_renders() {
        let mut table = Table::new(&[("sizes", Align::Left), ("n", Align::Right)]);
        let wide = "4,".repeat(40_000);
        table.row(vec![wide.clone(), "1".into()]);
        table.row(vec!["x".into(), "2".into()]);
        let text = table.render();
        assert!(text.contains(&format!("{wide}  1\n")));
        assert!(text.ends_with(&format!("x{}  2\n", " ".repeat(wide.len() - 1))));
    }
}
