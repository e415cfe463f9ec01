//! `relay_cost.svg`: the relay-cost goal at 64 clients as bars, one per relay (the median
//! over the rounds): the relay's CPU per query with the goal line at 0.8 x HAProxy's above,
//! QPS with HAProxy's below. Pipelined sluice is blue, serial sluice (pipelining off) orange.

use std::path::Path;

use anyhow::Result;
use plotters::prelude::*;

use super::chart::{err, legend, COLORS, SIZE};
use crate::analysis::relay_cost::{key_of, median_of, CPU_RATIO_GOAL, MANY, SERIAL};
use crate::measure::level::LevelResult;

/// The file name.
pub const FILE: &str = "relay_cost.svg";

/// One relay's bars: its CPU µs per query and its QPS.
#[derive(Debug, Clone, PartialEq)]
struct Bar {
    name: String,
    cpu: f64,
    qps: f64,
}

/// One of the two charts.
struct Panel {
    caption: String,
    ydesc: &'static str,
    value: fn(&Bar) -> f64,
    /// The reference line and its legend.
    line: Option<(f64, &'static str)>,
}

/// The relays in the order they were measured, with their bars.
fn bars(rows: &[&LevelResult]) -> Vec<Bar> {
    let mut keys: Vec<String> = Vec::new();
    for r in rows
        .iter()
        .filter(|r| r.clients == MANY && r.cpu_us_per_query.is_some())
    {
        let k = key_of(r);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.into_iter()
        .filter_map(|name| {
            let cpu = median_of(rows, &name, MANY, |r| r.cpu_us_per_query)?;
            let qps = median_of(rows, &name, MANY, |r| Some(r.qps))?;
            Some(Bar { name, cpu, qps })
        })
        .collect()
}

/// Draws it when the rows have relay processes with CPU at 64 clients; returns whether.
pub fn draw(dir: &Path, rows: &[&LevelResult]) -> Result<bool> {
    let bars = bars(rows);
    if bars.is_empty() {
        return Ok(false);
    }
    let haproxy = bars.iter().find(|b| b.name == "haproxy");
    let path = dir.join(FILE);
    let root = SVGBackend::new(&path, (SIZE.0, 760)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (top, bottom) = root.split_vertically(400);
    let cpu = Panel {
        caption: format!("Relay CPU per query at {MANY} clients (process utime + stime)"),
        ydesc: "CPU us per query",
        value: |b| b.cpu,
        line: haproxy.map(|h| (h.cpu * CPU_RATIO_GOAL, "goal: 0.8 x HAProxy's")),
    };
    let qps = Panel {
        caption: format!("QPS at {MANY} clients"),
        ydesc: "queries per second",
        value: |b| b.qps,
        line: haproxy.map(|h| (h.qps, "HAProxy's QPS (goal: at least)")),
    };
    panel(&top, &bars, &cpu)?;
    panel(&bottom, &bars, &qps)?;
    root.present().map_err(err)?;
    Ok(true)
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    bars: &[Bar],
    p: &Panel,
) -> Result<()> {
    let n = bars.len() as f64;
    let fmt = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 0.01 && i >= 0.0 {
            bars.get(i as usize)
                .map(|b| b.name.clone())
                .unwrap_or_default()
        } else {
            String::new()
        }
    };
    let ymax = bars
        .iter()
        .map(p.value)
        .chain(p.line.map(|l| l.0))
        .fold(1.0, f64::max)
        * 1.2;
    let mut chart = ChartBuilder::on(area)
        .caption(&p.caption, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(35)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.6..n - 0.4, 0.0..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(bars.len() * 2 + 1)
        .x_label_formatter(&fmt)
        .y_desc(p.ydesc)
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            let x = i as f64;
            let color = match b.name.as_str() {
                "haproxy" => COLORS[1],
                k if k.starts_with(SERIAL) => COLORS[3],
                k if k.starts_with("sluice") => COLORS[0],
                _ => COLORS[2],
            };
            Rectangle::new([(x - 0.3, 0.0), (x + 0.3, (p.value)(b))], color.filled())
        }))
        .map_err(err)?;
    if let Some((y, label)) = p.line {
        chart
            .draw_series(LineSeries::new(
                vec![(-0.6, y), (n - 0.4, y)],
                BLACK.stroke_width(2),
            ))
            .map_err(err)?
            .label(label)
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_bar_per_relay_at_64_clients_median_over_rounds() {
        let row = |target: &str, pool, clients, round, cpu, qps| LevelResult {
            target: target.into(),
            pool_size: pool,
            clients,
            round: Some(round),
            cpu_us_per_query: cpu,
            qps,
            ..LevelResult::default()
        };
        let rows = [
            row("direct", None, 64, 1, None, 28000.0),
            row("haproxy", None, 64, 1, Some(30.0), 15000.0),
            row("haproxy", None, 64, 2, Some(40.0), 13000.0),
            row("sluice", Some(4), 64, 1, Some(44.0), 12000.0),
            row("sluice", Some(4), 1, 1, Some(90.0), 9000.0),
        ];
        let refs: Vec<&LevelResult> = rows.iter().collect();
        let bar = |name: &str, cpu, qps| Bar {
            name: name.into(),
            cpu,
            qps,
        };
        assert_eq!(
            bars(&refs),
            [
                bar("haproxy", 35.0, 14000.0),
                bar("sluice_p4", 44.0, 12000.0)
            ]
        );
        let dir = tempfile::tempdir().unwrap();
        assert!(draw(dir.path(), &refs).unwrap());
        let svg = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        assert!(
            svg.contains("goal: 0.8 x HAProxy") && svg.contains("sluice_p4"),
            "{svg}"
        );
        assert!(!draw(dir.path(), &refs[..1]).unwrap());
    }

    #[test]
    fn serial_sluice_has_its_own_bar_and_colour() {
        let row = |target: &str, pool, cpu, qps| LevelResult {
            target: target.into(),
            pool_size: pool,
            clients: MANY,
            round: Some(1),
            cpu_us_per_query: Some(cpu),
            qps,
            ..LevelResult::default()
        };
        let rows = [
            row("haproxy", None, 30.0, 15000.0),
            row(SERIAL, Some(4), 50.0, 11000.0),
            row("sluice", Some(4), 44.0, 12000.0),
        ];
        let refs: Vec<&LevelResult> = rows.iter().collect();
        let names: Vec<String> = bars(&refs).into_iter().map(|b| b.name).collect();
        assert_eq!(names, ["haproxy", "sluice_serial_p4", "sluice_p4"]);
        let dir = tempfile::tempdir().unwrap();
        assert!(draw(dir.path(), &refs).unwrap());
        let svg = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        assert!(svg.contains("sluice_serial_p4"), "{svg}");
        // Serial sluice orange, pipelined sluice blue.
        let fill = |c: RGBColor| format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2);
        assert!(
            svg.contains(&fill(COLORS[3])) && svg.contains(&fill(COLORS[0])),
            "{svg}"
        );
    }
}
