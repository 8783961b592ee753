//! `/usage`: cost and tokens over time and by model and project, drawn as
//! inline SVG charts, and tool statistics.

use std::fmt::Write;

use super::{field, select};
use crate::query::usage::{GroupBy, UsageReport, UsageRow};
use crate::render::usage::{bytes, duration};
use crate::render::{group_digits, money};
use crate::serve::api::{self, Failure};
use crate::serve::html::{Nav, cut, esc, page};
use crate::serve::http::{Answer, Context};
use crate::serve::local::Local;
use crate::serve::params::Params;

/// `/usage`: cost and tokens over time (day, week or month), by model and
/// by project (each a link that filters the page), and tool statistics.
pub fn usage(local: &mut Local, context: &Context, params: &Params) -> Result<Answer, Failure> {
    // `by` takes every grouping the CLI and the API take: a period is the
    // charts' step; any other grouping is shown first, by day.
    let by = params.choice("by", &GroupBy::NAMES)?;
    let grouping = GroupBy::named(by).unwrap_or_default();
    let period = if grouping.is_time() { by } else { "day" };
    let over_time = api::usage_report(local, params, GroupBy::named(period).unwrap_or_default())?;
    let by_model = api::usage_report(local, params, GroupBy::Model)?;
    let by_project = api::usage_report(local, params, GroupBy::Project)?;
    let first = match grouping {
        GroupBy::Provider | GroupBy::Session => Some(api::usage_report(local, params, grouping)?),
        _ => None,
    };
    let tool_params = Params::parse(&params.with(&[], &["by", "model", "limit"]));
    let tools = api::tool_stats(local, &tool_params)?;
    let mut main = String::new();
    main.push_str("<form class=\"filters bar\" action=\"/usage\">");
    main.push_str(&select(
        "by",
        "per",
        Some(period),
        &["day", "week", "month"],
        false,
    ));
    main.push_str(&field(params, "model", "sonnet"));
    main.push_str(&field(params, "project", "cwd or part"));
    main.push_str(&field(params, "since", "30d"));
    main.push_str(&field(params, "until", "today"));
    main.push_str("<button>Show</button></form>");
    main.push_str("<section data-region id=\"usage\">");
    let total = &over_time.total;
    let _ = write!(
        main,
        "<div class=\"totals\"><div><b>{}</b><span>cost</span></div><div><b>{}</b><span>tokens</span></div><div><b>{}</b><span>records</span></div><div><b>{}</b><span>models</span></div></div>",
        money(total.cost),
        group_digits(total.total_tokens),
        group_digits(total.records),
        by_model.rows.len()
    );
    if !over_time.unpriced_models.is_empty() {
        let _ = write!(
            main,
            "<p class=\"problem\">{} tokens have no price and are not in the cost: {}</p>",
            group_digits(over_time.total.unpriced_tokens),
            esc(&over_time.unpriced_models.join(", "))
        );
    }
    if let Some(report) = &first {
        let _ = write!(main, "<h2>By {by}</h2>");
        key_chart(report, by, params, &mut main);
    }
    let _ = write!(main, "<h2>Cost per {period}</h2>");
    time_chart(&over_time, period, &mut main, Series::Cost);
    let _ = write!(main, "<h2>Tokens per {period}</h2>");
    time_chart(&over_time, period, &mut main, Series::Tokens);
    // The grouping asked for comes first.
    let (left, right) = if grouping == GroupBy::Project {
        ((&by_project, "project"), (&by_model, "model"))
    } else {
        ((&by_model, "model"), (&by_project, "project"))
    };
    let _ = write!(main, "<div class=\"cols\"><div><h2>By {}</h2>", left.1);
    key_chart(left.0, left.1, params, &mut main);
    let _ = write!(main, "</div><div><h2>By {}</h2>", right.1);
    key_chart(right.0, right.1, params, &mut main);
    main.push_str("</div></div>");
    main.push_str("<h2>Tools</h2><table class=\"tools\"><thead><tr><th>tool</th><th class=\"num\">calls</th><th class=\"num\">errors</th><th class=\"num\">error rate</th><th class=\"num\">no result</th><th class=\"num\">median</th><th class=\"num\">p95</th><th class=\"num\">largest output</th></tr></thead><tbody>");
    for tool in &tools {
        let _ = write!(
            main,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{:.1}%</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            esc(&tool.key),
            group_digits(tool.calls),
            group_digits(tool.errors),
            tool.error_rate * 100.0,
            group_digits(tool.no_result),
            tool.median_ms.map(duration).unwrap_or_default(),
            tool.p95_ms.map(duration).unwrap_or_default(),
            tool.max_result_len.map(bytes).unwrap_or_default()
        );
    }
    main.push_str("</tbody></table></section>");
    Ok(Answer::html(page("Usage", Nav::Usage, context.live, &main)))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Series {
    Cost,
    Tokens,
}

const CHART_W: f64 = 960.0;
const CHART_H: f64 = 220.0;
const PAD_L: f64 = 64.0;
const PAD_B: f64 = 28.0;
/// Room above the highest bar for its axis label.
const PAD_T: f64 = 16.0;

/// Bars per period, as inline SVG: cost, or tokens stacked by kind.
fn time_chart(report: &UsageReport, period: &str, out: &mut String, series: Series) {
    let rows = &report.rows;
    if rows.is_empty() {
        out.push_str("<p class=\"hint\">No usage recorded in this selection.</p>");
        return;
    }
    let parts = |row: &UsageRow| -> Vec<f64> {
        match series {
            Series::Cost => vec![row.cost],
            Series::Tokens => vec![
                row.input_tokens as f64,
                row.output_tokens as f64,
                row.cache_read_tokens as f64,
                row.cache_write_tokens as f64,
            ],
        }
    };
    let max = rows
        .iter()
        .map(|r| parts(r).iter().sum::<f64>())
        .fold(0.0_f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let plot_w = CHART_W - PAD_L - 8.0;
    let plot_h = CHART_H - PAD_B - PAD_T;
    // A real time axis: each period at its place from the first to the
    // last, empty ones as gaps (a key that is not a period: one slot each).
    let axis = Axis::of(rows, period);
    let slot = plot_w / axis.slots as f64;
    let bar = (slot * 0.8).max(1.0);
    let label = |v: f64| match series {
        Series::Cost => money(v),
        Series::Tokens => compact(v),
    };
    let _ = write!(
        out,
        "<svg class=\"chart\" data-chart=\"{}\" data-points=\"{}\" viewBox=\"0 0 {CHART_W} {CHART_H}\" role=\"img\" aria-label=\"{}\">",
        if series == Series::Cost {
            "cost"
        } else {
            "tokens"
        },
        rows.len(),
        if series == Series::Cost {
            "cost over time"
        } else {
            "tokens over time"
        }
    );
    // Grid lines at quarters of the maximum.
    for q in 0..=4 {
        let v = max * f64::from(q) / 4.0;
        let y = PAD_T + plot_h - plot_h * f64::from(q) / 4.0;
        let _ = write!(
            out,
            "<line class=\"grid\" x1=\"{PAD_L}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/><text class=\"axis\" x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            CHART_W - 8.0,
            PAD_L - 6.0,
            y + 4.0,
            esc(&label(v))
        );
    }
    // Labels with their year, as many as fit (7 units a character),
    // every `every` slots along the axis.
    let widest = rows
        .iter()
        .map(|r| r.key.chars().count())
        .max()
        .unwrap_or(1) as f64
        * 7.0
        + 10.0;
    let every = ((widest / slot).ceil() as usize).max(1);
    // Every other label is `alt`: a narrow screen shows half of them, larger.
    for (n, at) in (0..axis.slots).step_by(every).enumerate() {
        let _ = write!(
            out,
            "<text class=\"axis{}\" x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            if n % 2 == 1 { " alt" } else { "" },
            PAD_L + slot * at as f64 + slot / 2.0,
            CHART_H - 8.0,
            esc(&axis.label(at, rows))
        );
    }
    for (i, row) in rows.iter().enumerate() {
        let x = PAD_L + slot * axis.slot(i) as f64 + (slot - bar) / 2.0;
        let mut y = PAD_T + plot_h;
        let values = parts(row);
        for (k, value) in values.iter().enumerate() {
            let h = plot_h * value / max;
            y -= h;
            let _ = write!(
                out,
                "<rect class=\"s{k}\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{bar:.1}\" height=\"{h:.1}\"><title>{} · {}</title></rect>",
                esc(&row.key),
                esc(&match series {
                    Series::Cost => money(*value),
                    Series::Tokens => format!(
                        "{} {} tokens",
                        group_digits(*value as i64),
                        ["input", "output", "cache read", "cache write"][k]
                    ),
                })
            );
        }
    }
    out.push_str("</svg>");
    if series == Series::Tokens {
        out.push_str("<p class=\"legend\"><i class=\"s0\"></i>input <i class=\"s1\"></i>output <i class=\"s2\"></i>cache read <i class=\"s3\"></i>cache write</p>");
    }
}

/// Where a report's periods fall on a time axis running from the first to
/// the last: each row's slot, and the first period as a number (`position`:
/// a day, a week's Monday less 4 over 7, a month); `first` is `None` when a
/// key is not a period of `step` (then each row is a slot, in order).
struct Axis {
    step: &'static str,
    first: Option<i64>,
    row_slots: Vec<usize>,
    slots: usize,
}

/// The most slots an axis spreads over (ten years of days); a longer span
/// is drawn a row a slot.
const MAX_SLOTS: i64 = 3660;

impl Axis {
    fn of(rows: &[UsageRow], period: &str) -> Axis {
        let step = match period {
            "week" => "week",
            "month" => "month",
            _ => "day",
        };
        let positions: Option<Vec<i64>> = rows.iter().map(|row| position(step, &row.key)).collect();
        let range = positions
            .as_ref()
            .and_then(|p| Some((*p.iter().min()?, *p.iter().max()?)))
            .filter(|(first, last)| (1..=MAX_SLOTS).contains(&(last - first + 1)));
        match (positions, range) {
            (Some(positions), Some((first, last))) => Axis {
                step,
                first: Some(first),
                row_slots: positions.iter().map(|p| (p - first) as usize).collect(),
                slots: (last - first + 1) as usize,
            },
            _ => Axis {
                step,
                first: None,
                row_slots: (0..rows.len()).collect(),
                slots: rows.len().max(1),
            },
        }
    }

    /// Row `i`'s slot.
    fn slot(&self, i: usize) -> usize {
        self.row_slots[i]
    }

    /// The label of slot `at`: its period, year included.
    fn label(&self, at: usize, rows: &[UsageRow]) -> String {
        let Some(first) = self.first else {
            return rows.get(at).map(|row| row.key.clone()).unwrap_or_default();
        };
        let n = first + at as i64;
        match self.step {
            "week" => crate::query::tz::format_iso_week(n * 7 + 4),
            "month" => format!("{:04}-{:02}", n.div_euclid(12), n.rem_euclid(12) + 1),
            _ => crate::query::tz::format_day(n),
        }
    }
}

/// A period key as a number: `YYYY-MM-DD` its day, `YYYY-Www` its Monday's
/// day less 4, over 7 (1970-01-05 was a Monday), `YYYY-MM` months since
/// year 0.
fn position(step: &str, key: &str) -> Option<i64> {
    match step {
        "day" => crate::time::parse_day(key).filter(|_| key.len() == 10),
        "week" => {
            let (year, week) = key.split_once("-W")?;
            let (year, week): (i64, i64) = (year.parse().ok()?, week.parse().ok()?);
            // Week 1 holds January 4th.
            let jan4 = crate::time::days_from_civil(year, 1, 4);
            let monday = jan4 - (jan4 + 3).rem_euclid(7) + (week - 1) * 7;
            Some((monday - 4).div_euclid(7))
        }
        _ => {
            let (year, month) = key.split_once('-')?;
            let (year, month): (i64, i64) = (year.parse().ok()?, month.parse().ok()?);
            (1..=12).contains(&month).then_some(year * 12 + month - 1)
        }
    }
}

/// Horizontal bars of cost per key (model or project), each a link that
/// filters the page by it.
fn key_chart(report: &UsageReport, param: &str, params: &Params, out: &mut String) {
    let rows: Vec<&UsageRow> = report.rows.iter().take(12).collect();
    if rows.is_empty() {
        out.push_str("<p class=\"hint\">None.</p>");
        return;
    }
    let max = rows
        .iter()
        .map(|r| r.cost.max(0.0))
        .fold(0.0_f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let row_h = 26.0;
    let height = row_h * rows.len() as f64 + 4.0;
    let _ = write!(
        out,
        "<svg class=\"chart bars\" data-chart=\"{param}\" data-points=\"{}\" viewBox=\"0 0 460 {height}\" role=\"img\" aria-label=\"cost by {param}\">",
        rows.len()
    );
    for (i, row) in rows.iter().enumerate() {
        let y = row_h * i as f64 + 2.0;
        let w = 200.0 * row.cost.max(0.0) / max;
        let href = format!("/usage?{}", params.with(&[(param, &row.key)], &[]));
        let _ = write!(
            out,
            "<a href=\"{}\"><text class=\"key\" x=\"0\" y=\"{:.1}\">{}</text><rect class=\"s0\" x=\"190\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{:.1}\"><title>{} · {} · {} tokens</title></rect><text class=\"val\" x=\"{:.1}\" y=\"{:.1}\">{}</text></a>",
            esc(&href),
            y + 17.0,
            esc(&cut(&tail(&row.key, 28), 28)),
            y + 4.0,
            row_h - 8.0,
            esc(&row.key),
            money(row.cost),
            group_digits(row.total_tokens),
            194.0 + w,
            y + 17.0,
            money(row.cost)
        );
    }
    out.push_str("</svg>");
}

/// The end of a long key (a project's path ends with its name).
fn tail(key: &str, n: usize) -> String {
    let count = key.chars().count();
    if count <= n {
        key.to_owned()
    } else {
        let rest: String = key.chars().skip(count - n + 1).collect();
        format!("…{rest}")
    }
}

/// `12345678` as `12.3M`.
fn compact(v: f64) -> String {
    if v >= 1e9 {
        format!("{:.1}B", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_are_numbers_on_a_time_axis() {
        let day = |key| position("day", key).unwrap();
        assert_eq!(day("2026-03-01") - day("2026-02-28"), 1);
        assert_eq!(day("2025-01-01") - day("2024-12-31"), 1);
        let week = |key| position("week", key).unwrap();
        assert_eq!(week("2026-W01") - week("2025-W52"), 1);
        assert_eq!(week("2026-W10") - week("2026-W01"), 9);
        // Labels give the keys back, year included.
        let axis = Axis {
            step: "week",
            first: Some(week("2025-W52")),
            row_slots: vec![0, 2],
            slots: 3,
        };
        assert_eq!(axis.label(0, &[]), "2025-W52");
        assert_eq!(axis.label(1, &[]), "2026-W01");
        let month = |key| position("month", key).unwrap();
        assert_eq!(month("2026-01") - month("2025-12"), 1);
        let axis = Axis {
            step: "month",
            first: Some(month("2025-11")),
            row_slots: vec![0],
            slots: 1,
        };
        assert_eq!(axis.label(0, &[]), "2025-11");
        assert_eq!(position("day", "claude-opus"), None);
        assert_eq!(position("month", "2026-13"), None);
    }
}
