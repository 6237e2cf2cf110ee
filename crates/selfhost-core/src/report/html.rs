//! The report as one self-contained HTML page: inline CSS and SVG, no script, nothing fetched.
//! The markup is also well-formed XML (every element closed, every attribute quoted, every
//! string escaped), so that a plain XML parser can check it.

use std::fmt::Write;

use super::model::{Availability, Lane, Marker, ProbeKind, Table, UpgradeReport};
use crate::Component;

/// Width of the lane labels on the left of the timeline.
const LABEL_WIDTH: f64 = 190.0;
/// Width of the time axis.
const PLOT_WIDTH: f64 = 1080.0;
/// Space right of the plot, so that the last tick label fits.
const RIGHT_MARGIN: f64 = 30.0;
/// Height of one pod row inside a lane.
const TRACK_HEIGHT: f64 = 14.0;
/// Height of the API lane and of the steps lane.
const BAND_HEIGHT: f64 = 30.0;
/// Height of a component's heading row.
const HEADING_HEIGHT: f64 = 22.0;

const STYLE: &str = "
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 24px 32px; color: #1d232b; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px 0; }
h2 { font-size: 17px; margin: 28px 0 8px 0; }
p.sub { margin: 0 0 12px 0; color: #56606b; }
p.verdict { font-weight: 600; padding: 8px 12px; border-radius: 4px; display: inline-block; margin: 4px 0; }
p.verdict.ok { background: #e3f4ea; color: #14532d; }
p.verdict.bad { background: #fde8e8; color: #7f1d1d; }
table { border-collapse: collapse; font-size: 13px; margin-bottom: 12px; }
th, td { border: 1px solid #d5dbe1; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f1f4f7; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.legend { font-size: 13px; margin: 4px 0 8px 0; }
.legend span.swatch { display: inline-block; width: 22px; height: 11px; margin: 0 4px 0 14px; vertical-align: -1px; border: 1px solid #55606b; }
.legend span.first { margin-left: 0; }
svg { font-size: 11px; }
svg text { fill: #1d232b; }
svg .axis line { stroke: #e3e7eb; }
svg .axis text { fill: #56606b; }
svg .heading text { font-weight: 600; font-size: 12px; }
svg .lane-bg { fill: #f7f9fa; }
svg .pod { stroke: #2c343c; stroke-width: 0.6; }
svg .old, .legend .old { fill: #8a9bb0; background: #8a9bb0; }
svg .backup, .legend .backup { fill: #e8a33d; background: #e8a33d; }
svg .new, .legend .new { fill: #2f9e66; background: #2f9e66; }
svg .notready, .legend .notready { fill-opacity: 0.35; opacity: 0.45; }
svg .terminating { stroke-dasharray: 3 2; stroke-width: 1.2; }
svg .api-up { fill: #d9f2e3; }
svg .outage { fill: #d62828; fill-opacity: 0.75; }
svg .failure { stroke: #b00020; stroke-width: 1.2; }
svg .marker circle { fill: #1f4e79; }
svg .marker text { fill: #fff; font-size: 9px; font-weight: 600; }
svg .marker line { stroke: #1f4e79; stroke-opacity: 0.25; stroke-dasharray: 2 3; }
svg .marker.finish circle { fill: #14532d; }
svg .marker.finish.bad circle { fill: #b00020; }
ul.notes { font-size: 13px; color: #3d4650; }
";

/// Escapes text for HTML and XML, in content and in quoted attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters are not allowed in XML 1.0; nothing we record needs them.
            c if c.is_control() && c != '\n' && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Seconds as people read them on the page.
fn seconds(value: f64) -> String {
    format!("{value:.2} s")
}

/// A tick interval of 1, 2 or 5 times a power of ten giving at most about ten ticks.
fn tick_step(duration: f64) -> f64 {
    let rough = (duration / 10.0).max(1e-3);
    let power = 10f64.powf(rough.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|step| *step >= rough)
        .unwrap_or(10.0 * power)
}

/// Maps times to horizontal positions.
struct Scale {
    duration: f64,
}

impl Scale {
    fn x(&self, at: f64) -> f64 {
        LABEL_WIDTH + at.clamp(0.0, self.duration) / self.duration * PLOT_WIDTH
    }

    fn width(&self, from: f64, to: f64) -> f64 {
        // A state that lasted no visible time still gets a sliver, so that it can be seen.
        (self.x(to) - self.x(from)).max(1.0)
    }
}

/// Renders the whole page.
pub fn render_html(report: &UpgradeReport) -> String {
    let mut page = String::new();
    let title = escape(&report.title);
    let _ = writeln!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n\
         <title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <h1>{title}</h1>\n<p class=\"sub\">{}</p>\n<p class=\"verdict {}\">{}</p>",
        escape(&report.subtitle),
        if report.success { "ok" } else { "bad" },
        escape(&report.verdict),
    );
    page.push_str("<section id=\"timeline\">\n<h2>Timeline</h2>\n");
    page.push_str(
        "<div class=\"legend\"><span class=\"swatch old first\"></span>old template\
         <span class=\"swatch backup\"></span>backup\
         <span class=\"swatch new\"></span>new template\
         <span class=\"swatch new notready\"></span>not Ready (pale)\
         <span class=\"swatch api-legend\" style=\"background:#d62828\"></span>API failure\
         </div>\n",
    );
    render_svg(&mut page, report);
    page.push_str("</section>\n");
    render_markers_table(&mut page, &report.markers);
    for table in &report.tables {
        render_table(&mut page, table);
    }
    let mut notes: Vec<String> = Vec::new();
    notes.extend(report.availability.iter().map(|a| a.source.describe()));
    notes.extend(report.notes.iter().cloned());
    notes.push(
        "Pod bars show each pod's phase and Ready condition as the API reported them; a dashed \
         outline is a pod being deleted (Terminating). Hover a bar or a marker for details."
            .to_string(),
    );
    page.push_str("<section id=\"notes\">\n<h2>Notes</h2>\n<ul class=\"notes\">\n");
    for note in notes {
        let _ = writeln!(page, "<li>{}</li>", escape(&note));
    }
    page.push_str("</ul>\n</section>\n</body>\n</html>\n");
    page
}

fn render_svg(page: &mut String, report: &UpgradeReport) {
    let scale = Scale {
        duration: report.duration.max(1e-3),
    };
    let mut body = String::new();
    let mut y = 20.0;
    // The API lanes, one per kind of client.
    for availability in &report.availability {
        render_availability(&mut body, &scale, availability, y);
        y += BAND_HEIGHT + 6.0;
    }
    // The engine's steps.
    let steps_top = y;
    y += BAND_HEIGHT + 6.0;
    // The pod lanes, grouped by component.
    let mut component: Option<Component> = None;
    for lane in &report.lanes {
        if component != Some(lane.component) {
            component = Some(lane.component);
            let _ = writeln!(
                body,
                "<g class=\"heading\"><text x=\"4\" y=\"{:.1}\">{}</text></g>",
                y + 15.0,
                escape(lane.component.name())
            );
            y += HEADING_HEIGHT;
        }
        y = render_lane(&mut body, &scale, lane, y);
    }
    let height = y + 8.0;
    // Markers go last so that their guide lines are drawn over the lanes they cross.
    render_markers(&mut body, &scale, &report.markers, steps_top, height);
    let width = LABEL_WIDTH + PLOT_WIDTH + RIGHT_MARGIN;
    let _ = writeln!(
        page,
        "<svg width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" \
         role=\"img\" aria-label=\"upgrade timeline\">"
    );
    render_axis(page, &scale, height);
    page.push_str(&body);
    page.push_str("</svg>\n");
}

fn render_axis(page: &mut String, scale: &Scale, height: f64) {
    let step = tick_step(scale.duration);
    page.push_str("<g class=\"axis\">\n");
    let mut tick = 0.0;
    let mut n = 0u32;
    while tick <= scale.duration + 1e-9 && n <= 1000 {
        let x = scale.x(tick);
        let label = if step < 1.0 {
            format!("{tick:.1} s")
        } else {
            format!("{tick:.0} s")
        };
        let _ = writeln!(
            page,
            "<line x1=\"{x:.1}\" y1=\"14\" x2=\"{x:.1}\" y2=\"{height:.1}\"/>\
             <text x=\"{x:.1}\" y=\"11\" text-anchor=\"middle\">{label}</text>"
        );
        n += 1;
        tick = f64::from(n) * step;
    }
    page.push_str("</g>\n");
}

fn render_availability(body: &mut String, scale: &Scale, availability: &Availability, y: f64) {
    let connections = availability.source.connections();
    let _ = writeln!(
        body,
        "<g class=\"lane\" id=\"lane-api-{slug}\" data-lane=\"api\" data-connections=\"{slug}\">\
         <text x=\"4\" y=\"{:.1}\">API, {label}</text>\
         <rect class=\"api-up\" x=\"{:.1}\" y=\"{y:.1}\" width=\"{PLOT_WIDTH:.1}\" height=\"{BAND_HEIGHT:.1}\">\
         <title>{} probes on {}, {} failed</title></rect>",
        y + BAND_HEIGHT / 2.0 + 4.0,
        LABEL_WIDTH,
        availability.attempts,
        connections.describe(),
        availability.failures.len(),
        label = connections.label(),
        slug = connections.slug(),
    );
    for (from, to) in &availability.outages {
        let _ = writeln!(
            body,
            "<rect class=\"outage\" x=\"{:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{BAND_HEIGHT:.1}\">\
             <title>API down from {} to {}</title></rect>",
            scale.x(*from),
            scale.width(*from, *to),
            seconds(*from),
            seconds(*to),
        );
    }
    for failure in &availability.failures {
        // Reads tick the upper half, writes the lower half, health probes the whole band.
        let (top, bottom) = match failure.kind {
            ProbeKind::Read => (y, y + BAND_HEIGHT / 2.0),
            ProbeKind::Write => (y + BAND_HEIGHT / 2.0, y + BAND_HEIGHT),
            ProbeKind::Health => (y, y + BAND_HEIGHT),
        };
        let x = scale.x(failure.at);
        let _ = writeln!(
            body,
            "<line class=\"failure {}\" x1=\"{x:.1}\" y1=\"{top:.1}\" x2=\"{x:.1}\" y2=\"{bottom:.1}\">\
             <title>{} failed at {}: {}</title></line>",
            failure.kind.name(),
            failure.kind.name(),
            seconds(failure.at),
            escape(&failure.error),
        );
    }
    body.push_str("</g>\n");
}

fn render_lane(body: &mut String, scale: &Scale, lane: &Lane, y: f64) -> f64 {
    let height = lane.tracks.max(1) as f64 * TRACK_HEIGHT + 6.0;
    let node = escape(&lane.node);
    let component = lane.component.name();
    let _ = writeln!(
        body,
        "<g class=\"lane\" data-lane=\"pods\" data-node=\"{node}\" data-component=\"{component}\">\
         <rect class=\"lane-bg\" x=\"{LABEL_WIDTH:.1}\" y=\"{y:.1}\" width=\"{PLOT_WIDTH:.1}\" height=\"{:.1}\"/>\
         <text x=\"14\" y=\"{:.1}\">{node}</text>",
        height - 2.0,
        y + height / 2.0 + 3.0,
    );
    for bar in &lane.pods {
        let top = y + 2.0 + bar.track as f64 * TRACK_HEIGHT;
        for segment in &bar.segments {
            let state = &segment.state;
            let mut class = format!("pod {}", bar.kind.name());
            if !state.ready {
                class.push_str(" notready");
            }
            if state.terminating {
                class.push_str(" terminating");
            }
            let _ = writeln!(
                body,
                "<rect class=\"{class}\" x=\"{:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\">\
                 <title>{} ({} template) {}, {}{}: {} to {}</title></rect>",
                scale.x(segment.from),
                scale.width(segment.from, segment.to),
                TRACK_HEIGHT - 3.0,
                escape(&bar.pod),
                bar.kind.name(),
                escape(&state.phase),
                if state.ready { "Ready" } else { "not Ready" },
                if state.terminating {
                    ", Terminating"
                } else {
                    ""
                },
                seconds(segment.from),
                seconds(segment.to),
            );
        }
    }
    body.push_str("</g>\n");
    y + height
}

fn is_bad_outcome(step: &str) -> bool {
    step != "done" && step != "dry-run"
}

fn render_markers(body: &mut String, scale: &Scale, markers: &[Marker], top: f64, bottom: f64) {
    let _ = writeln!(
        body,
        "<g class=\"lane\" id=\"lane-steps\" data-lane=\"steps\">\
         <text x=\"4\" y=\"{:.1}\">Engine steps</text></g>",
        top + BAND_HEIGHT / 2.0 + 4.0
    );
    for (i, marker) in markers.iter().enumerate() {
        let x = scale.x(marker.at);
        // Three staggered rows, so that quick successive steps stay readable.
        let cy = top + 7.0 + (i % 3) as f64 * 8.0;
        let class = match (marker.finish, is_bad_outcome(&marker.step)) {
            (false, _) => "marker",
            (true, false) => "marker finish",
            (true, true) => "marker finish bad",
        };
        let _ = writeln!(
            body,
            "<g class=\"{class}\" data-step=\"{}\" data-component=\"{}\">\
             <line x1=\"{x:.1}\" y1=\"{cy:.1}\" x2=\"{x:.1}\" y2=\"{bottom:.1}\"/>\
             <circle cx=\"{x:.1}\" cy=\"{cy:.1}\" r=\"6.5\"/>\
             <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\
             <title>{}. {} at {}: {}: {}</title></g>",
            escape(&marker.step),
            marker.component.name(),
            cy + 3.0,
            i + 1,
            i + 1,
            marker.component.name(),
            seconds(marker.at),
            escape(&marker.step),
            escape(&marker.detail),
        );
    }
}

fn render_markers_table(page: &mut String, markers: &[Marker]) {
    let table = Table {
        title: "Engine steps".into(),
        headers: ["#", "at", "component", "step", "what"]
            .map(String::from)
            .to_vec(),
        rows: markers
            .iter()
            .enumerate()
            .map(|(i, m)| {
                vec![
                    (i + 1).to_string(),
                    seconds(m.at),
                    m.component.name().to_string(),
                    m.step.clone(),
                    m.detail.clone(),
                ]
            })
            .collect(),
    };
    render_table(page, &table);
}

fn looks_numeric(cell: &str) -> bool {
    cell.chars().next().is_some_and(|c| c.is_ascii_digit())
        && cell
            .chars()
            .all(|c| c.is_ascii_digit() || " .,s%/".contains(c))
}

fn render_table(page: &mut String, table: &Table) {
    let _ = write!(
        page,
        "<section class=\"table\">\n<h2>{}</h2>\n<table>\n<tr>",
        escape(&table.title)
    );
    for header in &table.headers {
        let _ = write!(page, "<th>{}</th>", escape(header));
    }
    page.push_str("</tr>\n");
    for row in &table.rows {
        page.push_str("<tr>");
        for cell in row {
            let class = if looks_numeric(cell) {
                " class=\"num\""
            } else {
                ""
            };
            let _ = write!(page, "<td{class}>{}</td>", escape(cell));
        }
        page.push_str("</tr>\n");
    }
    page.push_str("</table>\n</section>\n");
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn ticks_are_round_numbers() {
        for (duration, want) in [
            (10.0, 1.0),
            (9.0, 1.0),
            (25.0, 5.0),
            (1.3, 0.2),
            (0.05, 0.005),
        ] {
            let got = tick_step(duration);
            assert!((got - want).abs() < 1e-9, "{duration}: {got} != {want}");
        }
    }
}
