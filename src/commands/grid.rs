//! Plain-text grids for the operator commands (`verify`, `status`): columns padded to their widest cell.

/// The rows (the first one the header), one line each, cells two spaces apart.
pub fn render(rows: &[Vec<String>]) -> String {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns).map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn pads_columns_to_the_widest_cell() {
        let rows = vec![vec!["A".to_string(), "BB".to_string()], vec!["ccc".to_string(), "d".to_string()]];
        assert_eq!(super::render(&rows), "A    BB\nccc  d\n");
    }
}
