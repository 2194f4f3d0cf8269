//! `kasten edit --content` and `kasten history`: reading a new text, and the line diff of two.

use anyhow::{Result, bail};

/// Reads `--content`: the text, or `-` for stdin.
pub fn read_content(text: &str) -> Result<String> {
    let content = if text == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)?;
        s
    } else {
        text.to_owned()
    };
    if content.trim().is_empty() {
        bail!("the new text is empty; a note keeps at least one character (delete it instead)");
    }
    Ok(content)
}

/// A line diff of two texts: `- ` for lines only in `before`, `+ ` for lines only in
/// `after`, `  ` for lines both keep (longest common subsequence).
pub fn text_diff(before: &str, after: &str) -> Vec<String> {
    let a: Vec<&str> = before.lines().collect();
    let b: Vec<&str> = after.lines().collect();
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push(format!("  {}", a[i]));
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] > lcs[i + 1][j]) {
            out.push(format!("+ {}", b[j]));
            j += 1;
        } else {
            out.push(format!("- {}", a[i]));
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::text_diff;

    #[test]
    fn the_diff_keeps_common_lines_and_marks_the_rest() {
        assert_eq!(
            text_diff("a\nb\nc", "a\nx\nc\nd"),
            vec!["  a", "- b", "+ x", "  c", "+ d"]
        );
        assert_eq!(text_diff("", "new"), vec!["+ new"]);
    }
}
