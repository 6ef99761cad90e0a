//! What the CLI prints: aligned tables and `key: value` lines for people, one JSON
//! document on stdout for scripts (`--json`), and progress on stderr only when stderr is
//! a terminal.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// A table with a header row, printed with columns padded to their widest cell.
#[derive(Debug, Default)]
pub struct Table {
    header: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&'static str]) -> Self {
        Self {
            header: header.to_vec(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// A table of `items`, one row each.
    pub fn of<T>(header: &[&'static str], items: &[T], row: impl Fn(&T) -> Vec<String>) -> String {
        let mut t = Self::new(header);
        for item in items {
            t.row(row(item));
        }
        t.render()
    }

    /// The table as text; an empty table says so instead of printing a lone header.
    pub fn render(&self) -> String {
        if self.rows.is_empty() {
            return "(none)\n".to_owned();
        }
        let cols = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(cols) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let mut line = |cells: &mut dyn Iterator<Item = &str>| {
            let mut text = String::new();
            for (i, cell) in cells.enumerate().take(cols) {
                if i > 0 {
                    text.push_str("  ");
                }
                text.push_str(cell);
                if i + 1 < cols {
                    text.extend(std::iter::repeat_n(' ', widths[i] - cell.chars().count()));
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        };
        line(&mut self.header.iter().copied());
        for row in &self.rows {
            line(&mut row.iter().map(String::as_str));
        }
        out
    }
}

/// Cleans a server-supplied string for a terminal: control characters (an escape
/// sequence in a wallet name, say) become U+FFFD.
pub fn clean(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .collect()
}

/// Prints `text` to stdout.
pub fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// Prints `value` as pretty JSON, one document, to stdout.
pub fn print_json(value: &impl serde::Serialize) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => print(&format!("{text}\n")),
        Err(e) => eprint(&format!(
            "appliance-cli: cannot encode the answer as JSON: {e}\n"
        )),
    }
}

/// Prints `text` to stderr.
pub fn eprint(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
}

/// A spinner line on stderr while a long wait (a verification, an action) runs; nothing
/// at all when stderr is not a terminal, so scripts and logs see no progress noise.
pub struct Progress {
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Progress {
    /// Starts showing `label` after a short delay (quick calls show nothing).
    pub fn start(label: String) -> Self {
        if !std::io::stderr().is_terminal() {
            return Self { task: None };
        }
        let task = tokio::spawn(async move {
            const FRAMES: [char; 4] = ['|', '/', '-', '\\'];
            let started = Instant::now();
            tokio::time::sleep(Duration::from_millis(250)).await;
            let mut frame = 0;
            loop {
                eprint(&format!(
                    "\r{} {label} ({:.1} s)",
                    FRAMES[frame % FRAMES.len()],
                    started.elapsed().as_secs_f64()
                ));
                frame += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Self { task: Some(task) }
    }

    /// Stops and erases the spinner line.
    pub fn finish(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            eprint("\r\x1b[2K");
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_on_the_widest_cell() {
        let mut t = Table::new(&["ID", "NAME", "ADDRESS"]);
        t.row(vec!["1".into(), "a long name".into(), "0xabc".into()]);
        t.row(vec!["22".into(), "b".into(), "0xdef".into()]);
        assert_eq!(
            t.render(),
            "ID  NAME         ADDRESS\n1   a long name  0xabc\n22  b            0xdef\n"
        );
        assert_eq!(Table::new(&["ID"]).render(), "(none)\n");
    }

    #[test]
    fn control_characters_never_reach_the_terminal() {
        assert_eq!(clean("ok\x1b[31mred\n"), "ok\u{fffd}[31mred\u{fffd}");
    }
}
