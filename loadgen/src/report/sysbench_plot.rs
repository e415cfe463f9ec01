//! `sysbench.svg`: one row per workload. Left, sluice's and HAProxy's QPS over direct's at
//! each thread count (medians of the rounds' ratios) with the goal lines (1.0 everywhere,
//! 1.5 at 1024); right, every target's p99 (median over the rounds, log scale). sluice blue,
//! HAProxy red, direct green.

use std::path::Path;

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::chart::{err, legend, COLORS};
use crate::analysis::sysbench::{cells, levels, pairs, Cell, Level, DIRECT, HAPROXY, SLUICE};
use crate::analysis::sysbench_goals::{QPS_EVERY, QPS_TOP, TOP_THREADS};
use crate::measure::sysbench::SysbenchRow;

/// The file name.
pub const FILE: &str = "sysbench.svg";

/// The height of one workload's row.
const ROW_HEIGHT: u32 = 330;

fn color(target: &str) -> RGBColor {
    match target {
        SLUICE => COLORS[0],
        HAPROXY => COLORS[1],
        DIRECT => COLORS[2],
        _ => COLORS[4],
    }
}

/// The workloads in the rows, in order.
fn workloads(rows: &[SysbenchRow]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for (w, _) in pairs(rows) {
        if !v.contains(&w) {
            v.push(w);
        }
    }
    v
}

/// The thread counts measured, ascending.
fn thread_counts(rows: &[SysbenchRow]) -> Vec<usize> {
    let mut v: Vec<usize> = rows.iter().map(|r| r.threads).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Draws it when there are sysbench rows; returns whether.
pub fn draw(dir: &Path, rows: &[SysbenchRow]) -> Result<bool> {
    let names = workloads(rows);
    if names.is_empty() {
        return Ok(false);
    }
    let threads = thread_counts(rows);
    let (cells, levels) = (cells(rows), levels(rows));
    let path = dir.join(FILE);
    let root = SVGBackend::new(&path, (1100, ROW_HEIGHT * names.len() as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    for (area, workload) in root.split_evenly((names.len(), 1)).iter().zip(&names) {
        let (left, right) = area.split_horizontally(550);
        let mine: Vec<&Cell> = cells.iter().filter(|c| &c.workload == workload).collect();
        ratio_panel(&left, workload, &threads, &mine)?;
        let mine: Vec<&Level> = levels.iter().filter(|l| &l.workload == workload).collect();
        p99_panel(&right, workload, &threads, &mine)?;
    }
    root.present().map_err(err)?;
    Ok(true)
}

/// The x axis: thread counts at even spacing (they double, or quadruple).
fn x_labels(threads: &[usize]) -> impl Fn(&f64) -> String + '_ {
    move |x: &f64| {
        let i = x.round();
        match (x - i).abs() < 0.01 && i >= 0.0 {
            true => threads
                .get(i as usize)
                .map(|t| t.to_string())
                .unwrap_or_default(),
            false => String::new(),
        }
    }
}

fn ratio_panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    workload: &str,
    threads: &[usize],
    cells: &[&Cell],
) -> Result<()> {
    let at = |t: usize| threads.iter().position(|&x| x == t).unwrap_or(0) as f64;
    let ymax = cells
        .iter()
        .filter_map(|c| c.qps.map(|s| s.median))
        .fold(QPS_TOP, f64::max)
        // Room above the lines for the legend.
        * 1.5;
    let n = threads.len() as f64;
    let fmt = x_labels(threads);
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{workload}: QPS / direct's"), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(-0.5..n - 0.5, 0.0..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(threads.len() * 2 + 1)
        .x_label_formatter(&fmt)
        .x_desc("threads")
        .y_desc("QPS ratio (median)")
        .y_label_formatter(&|y| format!("{y:.1}"))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(LineSeries::new(
            vec![(-0.5, QPS_EVERY), (n - 0.5, QPS_EVERY)],
            BLACK.stroke_width(1),
        ))
        .map_err(err)?
        .label(format!(
            "goal: {QPS_EVERY:.1}x, {QPS_TOP:.1}x at {TOP_THREADS}"
        ))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
    if threads.contains(&TOP_THREADS) {
        let x = at(TOP_THREADS);
        chart
            .draw_series(LineSeries::new(
                vec![(x - 0.25, QPS_TOP), (x + 0.25, QPS_TOP)],
                BLACK.stroke_width(2),
            ))
            .map_err(err)?;
    }
    for target in [HAPROXY, SLUICE] {
        let c = color(target);
        let pts: Vec<(f64, f64)> = cells
            .iter()
            .filter(|x| x.target == target)
            .filter_map(|x| x.qps.map(|s| (at(x.threads), s.median)))
            .collect();
        if pts.is_empty() {
            continue;
        }
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
            .map_err(err)?
            .label(format!("{target} / direct"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))
            .map_err(err)?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)
}

fn p99_panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    workload: &str,
    threads: &[usize],
    levels: &[&Level],
) -> Result<()> {
    let at = |t: usize| threads.iter().position(|&x| x == t).unwrap_or(0) as f64;
    let vals: Vec<f64> = levels
        .iter()
        .filter_map(|l| l.p99_ms)
        .filter(|v| *v > 0.0)
        .collect();
    // Room above the lines for the legend (a log scale).
    let ymax = vals.iter().copied().fold(1.0, f64::max) * 12.0;
    let ymin = vals
        .iter()
        .copied()
        .fold(f64::MAX, f64::min)
        .min(ymax / 10.0)
        * 0.5;
    let n = threads.len() as f64;
    let fmt = x_labels(threads);
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{workload}: p99 per transaction"),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5..n - 0.5, (ymin..ymax).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(threads.len() * 2 + 1)
        .x_label_formatter(&fmt)
        .x_desc("threads")
        .y_desc("p99 ms (median, log scale)")
        .y_label_formatter(&|y| format!("{y:.1}"))
        .draw()
        .map_err(err)?;
    for target in [DIRECT, HAPROXY, SLUICE] {
        let c = color(target);
        let pts: Vec<(f64, f64)> = levels
            .iter()
            .filter(|l| l.target == target)
            .filter_map(|l| l.p99_ms.filter(|v| *v > 0.0).map(|v| (at(l.threads), v)))
            .collect();
        if pts.is_empty() {
            continue;
        }
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
            .map_err(err)?
            .label(target)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))
            .map_err(err)?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::sysbench::tests::{refused, row};

    #[test]
    fn one_row_of_panels_per_workload() {
        let mut rows = Vec::new();
        for w in ["oltp_read_only", "oltp_point_select"] {
            for t in [16, 1024] {
                rows.push(row(1, w, t, DIRECT, 1000.0, 10.0 * t as f64));
                rows.push(row(1, w, t, HAPROXY, 900.0, 12.0 * t as f64));
                rows.push(row(1, w, t, SLUICE, 1200.0, 3.0 * t as f64));
            }
        }
        rows.push(refused(2, "oltp_read_only", 1024, DIRECT, 5));
        assert_eq!(workloads(&rows), ["oltp_point_select", "oltp_read_only"]);
        assert_eq!(thread_counts(&rows), [16, 1024]);
        let dir = tempfile::tempdir().unwrap();
        assert!(draw(dir.path(), &rows).unwrap());
        let svg = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        assert!(svg.trim_start().starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        for text in [
            "oltp_point_select: QPS / direct",
            "oltp_read_only: p99 per transaction",
            "sluice / direct",
            "goal: 1.0x, 1.5x at 1024",
            "1024",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
        assert!(!draw(dir.path(), &[]).unwrap());
    }
}
