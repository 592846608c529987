//! A case's graph or schedule picture for the HTML report: Graphviz's SVG inlined into the
//! page, or — when Graphviz is not installed or fails — the DOT text in a `<pre>` with a note.
//! Never an error: a report is not lost for want of a picture.

use crate::case::Case;
use crate::dot::{self, DotError, DotOpts, What};

use super::esc;

/// DOT text longer than this is not drawn (Graphviz would take long and the picture would
/// be unreadable); the report says how to draw it.
const MAX_DOT: usize = 200_000;

/// The HTML of the `what` picture of `case`, with `highlight` (a case-file node id) in red.
/// `prefix` makes the SVG's element ids unique in the page; `file` is the case file (for the
/// command that draws it by hand).
pub fn picture(
    case: &Case,
    what: What,
    highlight: Option<u64>,
    prefix: &str,
    file: &str,
) -> String {
    let opts = DotOpts {
        what,
        kernel: None,
        highlight,
    };
    let by_hand = {
        let mut c = format!(
            "uopkit dot {} --what {}",
            shell_words::quote(file),
            match what {
                What::Graph => "graph",
                What::Schedule => "schedule",
                What::Kernel => "kernel",
            }
        );
        if let Some(n) = highlight {
            c += &format!(" --highlight {n}");
        }
        c + " --format svg"
    };
    let text = match dot::case_dot(case, &opts) {
        Ok(t) => t,
        // The highlighted node may not be drawn in this picture: draw it without.
        Err(DotError::NoSuchNode(_)) if highlight.is_some() => {
            return picture(case, what, None, prefix, file)
        }
        Err(e) => {
            return format!(
                "<p class=\"note\">No picture: {}</p>\n",
                esc(&e.to_string())
            )
        }
    };
    if text.len() > MAX_DOT {
        return format!(
            "<p class=\"note\">Too large to draw here ({} bytes of DOT); draw it with <code>{}</code>.</p>\n",
            text.len(),
            esc(&by_hand)
        );
    }
    match dot::to_svg(&text) {
        Ok(svg) => match inline_svg(&String::from_utf8_lossy(&svg), prefix) {
            Some(s) => format!("<div class=\"pic\">{s}</div>\n"),
            None => fallback(&text, "Graphviz gave no SVG element", &by_hand),
        },
        Err(DotError::GraphvizMissing) => fallback(
            &text,
            "install graphviz for pictures (the `dot` program); the DOT text follows",
            &by_hand,
        ),
        Err(e) => fallback(&text, &e.to_string(), &by_hand),
    }
}

fn fallback(dot_text: &str, why: &str, by_hand: &str) -> String {
    format!(
        "<p class=\"note\">No picture: {} (then: <code>{}</code>).</p>\n<pre class=\"dot\">{}</pre>\n",
        esc(why),
        esc(by_hand),
        esc(dot_text)
    )
}

/// Graphviz's SVG document as an element to put inside HTML: the XML declaration, DOCTYPE
/// and comments before `<svg` dropped, every `id="…"` (and `#…` reference to one) prefixed
/// with `prefix` so that several pictures in one page do not share ids.
pub fn inline_svg(svg: &str, prefix: &str) -> Option<String> {
    let start = svg.find("<svg")?;
    let body = svg[start..].trim_end();
    Some(
        body.replace(" id=\"", &format!(" id=\"{prefix}"))
            .replace("url(#", &format!("url(#{prefix}"))
            .replace("href=\"#", &format!("href=\"#{prefix}")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prologue_goes_and_ids_are_prefixed() {
        let svg = "<?xml version=\"1.0\"?>\n<!DOCTYPE svg>\n<!-- Generated -->\n<svg width=\"8pt\">\n<g id=\"graph0\" class=\"graph\"><g id=\"node1\"></g></g>\n</svg>\n";
        let s = inline_svg(svg, "t3-").expect("an svg");
        assert!(s.starts_with("<svg width"), "{s}");
        assert!(
            s.contains("id=\"t3-graph0\"") && s.contains("id=\"t3-node1\""),
            "{s}"
        );
        assert!(!s.contains("<?xml") && !s.contains("DOCTYPE"), "{s}");
        assert_eq!(inline_svg("no picture", "x"), None);
    }
}
