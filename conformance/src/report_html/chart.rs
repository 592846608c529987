//! A ULP-distance histogram ([`Histogram`]) as an inline SVG bar chart: one bar per non-empty
//! bucket in distance order (a run of empty buckets between two of them is one narrow "…"
//! column, so that 0 and 2^29 ULP sit side by side), then a "NaN" bar when a NaN stood
//! against a number. Bar heights are on a log scale (log(1 + count)) so that a handful of 1-ULP
//! elements stays visible beside thousands of exact ones; every bar is labelled with its
//! count. Each bar carries `data-bucket` and `data-count` attributes and a `<title>` (a
//! tooltip in a browser).

use std::fmt::Write as _;

use super::esc;
use crate::compare::Histogram;

const PLOT_H: f64 = 150.0;
const BAR_W: f64 = 34.0;
const GAP: f64 = 10.0;
const LEFT: f64 = 12.0;
const TOP: f64 = 22.0;
/// The narrowest chart (room for the axis title).
const MIN_W: f64 = 380.0;
/// The width of a run of empty buckets.
const GAP_W: f64 = 22.0;

/// The chart of `h`; `title` names it for screen readers.
pub fn histogram_svg(h: &Histogram, title: &str) -> String {
    // (label, count, class); class "gap" is a run of empty buckets (count: how many).
    let mut bars: Vec<(String, u64, &str)> = vec![];
    let mut previous: Option<usize> = None;
    for (k, &n) in h.buckets.iter().enumerate().filter(|(_, &n)| n > 0) {
        let empty = k - previous.map_or(0, |p| p + 1);
        if empty > 0 {
            bars.push(("…".to_string(), empty as u64, "gap"));
        }
        let class = if k == 0 { "exact" } else { "off" };
        bars.push((Histogram::label(k), n, class));
        previous = Some(k);
    }
    if h.nan > 0 {
        bars.push(("NaN".to_string(), h.nan, "nan"));
    }
    let max = bars
        .iter()
        .filter(|b| b.2 != "gap")
        .map(|b| b.1)
        .max()
        .unwrap_or(0);
    let scale = |n: u64| {
        if max == 0 {
            0.0
        } else {
            PLOT_H * ((1 + n) as f64).ln() / ((1 + max) as f64).ln()
        }
    };
    let column = |class: &str| if class == "gap" { GAP_W } else { BAR_W + GAP };
    let plot_w: f64 = bars.iter().map(|b| column(b.2)).sum();
    let width = (LEFT * 2.0 + plot_w).max(MIN_W);
    // Room under the plot for the bucket labels (rotated 45°) and the axis title.
    let longest = bars.iter().map(|b| b.0.chars().count()).max().unwrap_or(1);
    let height = TOP + PLOT_H + 20.0 + 6.5 * longest as f64 * 0.71 + 24.0;
    let base = TOP + PLOT_H;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg class=\"histogram\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" role=\"img\" aria-label=\"{}\">",
        esc(title)
    );
    let _ = writeln!(s, "<title>{}</title>", esc(title));
    let mut x0 = LEFT;
    for (label, n, class) in &bars {
        let x = x0 + GAP / 2.0;
        x0 += column(class);
        if *class == "gap" {
            let cx = x0 - GAP_W / 2.0;
            let _ = writeln!(
                s,
                "<g class=\"gap\"><title>{n} empty bucket(s)</title><text x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">…</text></g>",
                base - 4.0
            );
            continue;
        }
        let h = scale(*n);
        let cx = x + BAR_W / 2.0;
        let what = if label == "NaN" {
            "NaN against a number (or differing NaNs)".to_string()
        } else {
            format!("{label} ULP")
        };
        let _ = writeln!(
            s,
            "<g class=\"bar {class}\" data-bucket=\"{}\" data-count=\"{n}\"><title>{}: {n} element(s)</title>\
             <rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{BAR_W:.0}\" height=\"{h:.1}\"/>\
             <text class=\"count\" x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{n}</text>\
             <text class=\"bucket\" x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"end\" transform=\"rotate(-45 {cx:.1} {:.1})\">{}</text></g>",
            esc(label),
            esc(&what),
            base - h,
            base - h - 4.0,
            base + 14.0,
            base + 14.0,
            esc(label)
        );
    }
    let _ = writeln!(
        s,
        "<line class=\"axis\" x1=\"{LEFT:.0}\" y1=\"{base:.0}\" x2=\"{:.0}\" y2=\"{base:.0}\"/>",
        width - LEFT
    );
    let _ = writeln!(
        s,
        "<text class=\"axis-title\" x=\"{:.0}\" y=\"{:.0}\" text-anchor=\"middle\">ULP distance (bar heights on a log scale)</text>",
        width / 2.0,
        height - 6.0
    );
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_bar_per_bucket_up_to_the_last_with_counts() {
        let mut h = Histogram::default();
        for d in [0, 0, 0, 1, 5, 6] {
            h.add(Some(d));
        }
        h.add(None);
        let svg = histogram_svg(&h, "t");
        // 0, 1, a gap for 2 and 3–4, 5–8, then NaN.
        assert_eq!(svg.matches("<rect").count(), 4, "{svg}");
        assert!(svg.contains("data-bucket=\"0\" data-count=\"3\""), "{svg}");
        assert!(svg.contains("<title>2 empty bucket(s)</title>"), "{svg}");
        assert!(!svg.contains("data-bucket=\"2\""), "{svg}");
        assert!(
            svg.contains("data-bucket=\"5–8\" data-count=\"2\""),
            "{svg}"
        );
        assert!(
            svg.contains("data-bucket=\"NaN\" data-count=\"1\""),
            "{svg}"
        );
    }

    #[test]
    fn an_empty_histogram_is_still_a_picture() {
        let svg = histogram_svg(&Histogram::default(), "none");
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(!svg.contains("<rect"));
    }
}
