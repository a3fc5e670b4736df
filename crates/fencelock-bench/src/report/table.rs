//! Markdown tables: [`Table`] writes one (heading, header, alignment row, rows), and
//! [`library_table`] the W1–W5 kind; the cells' formats.

use std::fmt::Write as _;

use super::fmt_ratio;
use super::model::LibraryRow;

/// A table of W1–W5 rows, one a contender: the library first, then what `cells` makes of the
/// measurements, the ratio to raw last; a row without numbers shows its error.
pub(super) fn library_table<M>(
    md: &mut String,
    rows: &[LibraryRow<M>],
    heading: &str,
    header: &[&str],
    align: &str,
    cells: impl Fn(&M) -> Vec<String>,
) {
    if rows.is_empty() {
        return;
    }
    let mut table = Table::start(md, heading, header, align);
    for r in rows {
        if let Some(e) = &r.error {
            table.failed(&[&r.library], e);
            continue;
        }
        let mut row = vec![r.library.clone()];
        row.extend(cells(&r.measured));
        row.push(ratio_cell(r.ratio_to_raw));
        table.row(&row);
    }
}

/// One markdown table being written: [`Table::start`] writes its heading, header and alignment
/// row; each row follows.
pub(super) struct Table<'a> {
    md: &'a mut String,
    columns: usize,
}

impl<'a> Table<'a> {
    /// The heading (`### heading`), then the header; `align` has a letter per column, `l` for
    /// left and `r` for right.
    pub(super) fn start(
        md: &'a mut String,
        heading: &str,
        header: &[&str],
        align: &str,
    ) -> Table<'a> {
        debug_assert_eq!(header.len(), align.len(), "{heading}");
        let _ = writeln!(md, "\n### {heading}\n");
        let _ = writeln!(md, "| {} |", header.join(" | "));
        let separator: String = align
            .chars()
            .map(|a| if a == 'r' { "---:|" } else { "---|" })
            .collect();
        let _ = writeln!(md, "|{separator}");
        Table {
            md,
            columns: header.len(),
        }
    }

    pub(super) fn row(&mut self, cells: &[String]) {
        debug_assert_eq!(cells.len(), self.columns);
        let _ = writeln!(self.md, "| {} |", cells.join(" | "));
    }

    /// A row without numbers: the cells that name it (`lead`), the error, the rest empty.
    pub(super) fn failed(&mut self, lead: &[&str], error: &str) {
        for cell in lead {
            let _ = write!(self.md, "| {cell} ");
        }
        let _ = write!(self.md, "| {} |", cell_error(error));
        let empty = self.columns.saturating_sub(lead.len() + 1);
        let _ = writeln!(self.md, "{}", " |".repeat(empty));
    }
}

/// A number with `decimals` decimals; none (or not finite): –.
pub(super) fn opt(v: Option<f64>, decimals: usize) -> String {
    v.filter(|x| x.is_finite())
        .map_or_else(|| "–".into(), |x| format!("{x:.decimals$}"))
}

/// A ratio as the tables print it; none: –.
pub(super) fn ratio_cell(r: Option<f64>) -> String {
    r.map_or_else(|| "–".into(), fmt_ratio)
}

/// An error in a cell: in italics, without the table's `|` and line breaks.
pub(super) fn cell_error(e: &str) -> String {
    format!("*{}*", e.replace('|', "/").replace('\n', " "))
}
