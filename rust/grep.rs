//! Exact search over files: literal or regular-expression matches, line by line, as `rg -n` reports them.
//!
//! A pattern is compiled once with the `regex` crate (`regex::escape` for a literal), multi-line so that
//! `^` and `$` match at line boundaries. Each file is searched as one buffer (the crate's literal
//! prefilters and DFA skip most of it); every candidate is confirmed on its line alone, so a match that
//! would span lines (`a\s+b` across a line break) counts on no line, as with ripgrep. Files are searched
//! in parallel (rayon) and reported in the order given; each line with a match is reported once.
//! The core never opens a file: Python reads each one through its single checked reader (no symbolic
//! link, regular files only, still the content indexed) and hands the texts over.

use rayon::prelude::*;
use regex::bytes::{Regex, RegexBuilder};

/// Largest compiled pattern accepted (the crate's own default is 10 MiB).
const SIZE_LIMIT: usize = 1 << 23;

/// One line that holds a match: the file's position in the list given, its 1-based line number, and
/// its text (lossy UTF-8, cut at `max_line_chars` characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineMatch {
    pub file: usize,
    pub line: usize,
    pub text: String,
}

/// What a search found: the first `max_matches` lines, the count of every matching line, and how
/// many files matched.
#[derive(Debug, Default)]
pub struct GrepReport {
    pub matches: Vec<LineMatch>,
    pub total: usize,
    pub files_matched: usize,
}

/// Compiles `pattern` (escaped first when `literal`); the error is one line.
pub fn compile(pattern: &str, literal: bool, ignore_case: bool) -> Result<Regex, String> {
    let source = if literal {
        regex::escape(pattern)
    } else {
        pattern.to_owned()
    };
    RegexBuilder::new(&source)
        .multi_line(true)
        .case_insensitive(ignore_case)
        .size_limit(SIZE_LIMIT)
        .build()
        .map_err(|e| one_line(&e))
}

/// The regex crate's (multi-line) error as one line: its last line, or its kind.
fn one_line(error: &regex::Error) -> String {
    match error {
        regex::Error::Syntax(text) => {
            let last = text
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("syntax error");
            last.trim().trim_start_matches("error: ").to_owned()
        }
        regex::Error::CompiledTooBig(limit) => {
            format!("the compiled pattern exceeds {limit} bytes")
        }
        other => other.to_string().replace('\n', " "),
    }
}

/// Lines of `data` matching `re`, as `(1-based line number, line without its line break)`.
pub fn matching_lines<'a>(re: &Regex, data: &'a [u8]) -> Vec<(usize, &'a [u8])> {
    let mut out = Vec::new();
    let mut pos = 0;
    let mut line_no = 1;
    let mut counted = 0; // bytes before `counted` have their line breaks in `line_no`
    while pos < data.len() {
        let Some(found) = re.find_at(data, pos) else {
            break;
        };
        let start = data[..found.start()]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let start = start.max(pos.min(found.start()));
        let end = data[found.start()..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(data.len(), |i| found.start() + i);
        line_no += data[counted..start].iter().filter(|&&b| b == b'\n').count();
        counted = start;
        let line = &data[start..end];
        if re.is_match(line) {
            out.push((line_no, line));
        }
        if end >= data.len() {
            break;
        }
        pos = end + 1;
    }
    out
}

/// Searches every text of `texts` (a file's content each) for `re`; keeps the first `max_matches`
/// lines (in the order given).
pub fn grep_texts<T: AsRef<[u8]> + Sync>(
    texts: &[T],
    re: &Regex,
    max_matches: usize,
    max_line_chars: usize,
) -> GrepReport {
    let per_file: Vec<Vec<(usize, String)>> = texts
        .par_iter()
        .map(|data| {
            matching_lines(re, data.as_ref())
                .into_iter()
                .map(|(n, line)| {
                    (
                        n,
                        String::from_utf8_lossy(line)
                            .chars()
                            .take(max_line_chars)
                            .collect(),
                    )
                })
                .collect()
        })
        .collect();
    let mut report = GrepReport::default();
    for (file, lines) in per_file.into_iter().enumerate() {
        if !lines.is_empty() {
            report.files_matched += 1;
        }
        report.total += lines.len();
        for (line, text) in lines {
            if report.matches.len() < max_matches {
                report.matches.push(LineMatch { file, line, text });
            }
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(pattern: &str, literal: bool, text: &str) -> Vec<usize> {
        let re = compile(pattern, literal, false).unwrap();
        matching_lines(&re, text.as_bytes())
            .into_iter()
            .map(|(n, _)| n)
            .collect()
    }

    #[test]
    fn literal_and_regex_lines() {
        let text = "fn main() {\n    let a.b = 1;\n}\nfn other() {}\n";
        assert_eq!(lines("fn ", true, text), vec![1, 4]);
        assert_eq!(lines("a.b", true, text), vec![2]);
        assert_eq!(lines("a.b", false, text), vec![2]);
        assert_eq!(lines("^fn", false, text), vec![1, 4]);
        assert_eq!(lines(r"\{$", false, text), vec![1]);
        assert_eq!(lines("(", true, text), vec![1, 4]);
    }

    #[test]
    fn a_match_across_lines_counts_on_none() {
        assert_eq!(
            lines(r"main\(\)\s+\{\s+let", false, "fn main() {\n    let x;\n"),
            Vec::<usize>::new()
        );
        assert_eq!(lines(r"x\s*;", false, "fn main() {\n    let x;\n"), vec![2]);
    }

    #[test]
    fn every_line_once_and_the_last_without_newline() {
        assert_eq!(lines("a", true, "aaa\nb\na"), vec![1, 3]);
        assert_eq!(lines("", true, "x\n\ny"), vec![1, 2, 3]);
    }

    #[test]
    fn texts_in_order_with_counts() {
        let re = compile("x", true, false).unwrap();
        let report = grep_texts(&["a\nx\n", "none", "xx\nx"], &re, 2, 10);
        assert_eq!((report.total, report.files_matched), (3, 2));
        let found: Vec<(usize, usize)> = report.matches.iter().map(|m| (m.file, m.line)).collect();
        assert_eq!(found, vec![(0, 2), (2, 1)]);
    }

    #[test]
    fn invalid_pattern_is_one_line() {
        let error = compile("(abc", false, false).unwrap_err();
        assert!(
            !error.contains('\n') && error.contains("unclosed group"),
            "{error}"
        );
    }
}
