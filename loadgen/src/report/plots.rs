//! SVG plots (plotters, SVG backend only: no fonts or image libraries needed).

use std::path::Path;

use anyhow::Result;
use plotters::prelude::*;

use super::chart::{err, legend, COLORS, SIZE};
use super::relay_plot;
use super::results::Report;
use super::sysbench_plot;
use crate::measure::level::LevelResult;
use crate::measure::timeline::{SoakSample, TimelineRow};

/// Draws every plot the report has data for; returns the files written.
pub fn draw_all(rep: &Report) -> Result<Vec<String>> {
    let mut written = Vec::new();
    let a = rep.rows_of("A");
    if !a.is_empty() {
        throughput(&rep.dir.join("throughput_vs_connections.svg"), &a)?;
        p99(&rep.dir.join("p99_vs_connections.svg"), &a)?;
        written.extend([
            "throughput_vs_connections.svg".into(),
            "p99_vs_connections.svg".into(),
        ]);
    }
    let mut bars: Vec<(String, &LevelResult)> = Vec::new();
    let c = rep.rows_of("C");
    if let Some(clients) = c.first().map(|r| r.clients) {
        if let Some(direct) = a.iter().find(|r| r.clients == clients) {
            bars.push((format!("direct {clients}"), direct));
        }
        bars.extend(
            c.iter()
                .map(|r| (format!("pool {}", r.pool_size.unwrap_or(0)), *r)),
        );
        bars.extend(rep.rows_of("proxy").into_iter().map(|r| {
            (
                format!(
                    "sluice {}",
                    r.pool_size.map(|p| p.to_string()).unwrap_or_default()
                ),
                r,
            )
        }));
        pool_vs_direct(&rep.dir.join("pool_vs_direct_512.svg"), &bars)?;
        written.push("pool_vs_direct_512.svg".into());
    }
    let o = rep.rows_of("O");
    if !o.is_empty() {
        open_loop(&rep.dir.join("openloop_latency.svg"), &o)?;
        written.push("openloop_latency.svg".into());
    }
    let d = rep.rows_of("D");
    if !d.is_empty() {
        idle(&rep.dir.join("idle_connections.svg"), &d)?;
        written.push("idle_connections.svg".into());
    }
    if !rep.soak.is_empty() {
        soak(&rep.dir.join("soak.svg"), &rep.soak)?;
        written.push("soak.svg".into());
    }
    if relay_plot::draw(&rep.dir, &rep.rows_of("overhead"))? {
        written.push(relay_plot::FILE.into());
    }
    if sysbench_plot::draw(&rep.dir, &rep.sysbench)? {
        written.push(sysbench_plot::FILE.into());
    }
    let auto: Vec<&TimelineRow> = rep.timeline.iter().filter(|s| s.config == "auto").collect();
    if !auto.is_empty() {
        let best = rep
            .best_fixed_e()
            .map(|r| (r.pool_size.unwrap_or(0), r.qps));
        adaptive(&rep.dir.join("expE_adaptive.svg"), &auto, best)?;
        written.push("expE_adaptive.svg".into());
    }
    Ok(written)
}

/// Experiment E: the auto limit (right axis) and QPS (left axis) over time, with the best
/// fixed P's QPS for reference and the moment the server lost a CPU.
fn adaptive(path: &Path, rows: &[&TimelineRow], best: Option<(usize, f64)>) -> Result<()> {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let tmax = rows.iter().map(|r| r.t_s).fold(1.0, f64::max);
    let qmax = rows
        .iter()
        .map(|r| r.qps)
        .chain(best.map(|b| b.1))
        .fold(1.0, f64::max)
        * 1.15;
    let lmax = rows
        .iter()
        .map(|r| r.limit)
        .max()
        .unwrap_or(1)
        .max(best.map_or(1, |b| b.0 as u32)) as f64
        * 1.2
        + 1.0;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "pool_size = auto: limit and QPS over time",
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .right_y_label_area_size(60)
        .build_cartesian_2d(0.0..tmax, 0.0..qmax)
        .map_err(err)?
        .set_secondary_coord(0.0..tmax, 0.0..lmax);
    chart
        .configure_mesh()
        .x_desc("seconds since the first answer")
        .y_desc("queries per second")
        .draw()
        .map_err(err)?;
    chart
        .configure_secondary_axes()
        .y_desc("concurrency limit (slots)")
        .draw()
        .map_err(err)?;
    let (qc, lc, bc, rc) = (COLORS[0], COLORS[1], COLORS[2], COLORS[4]);
    chart
        .draw_series(LineSeries::new(
            rows.iter().map(|r| (r.t_s, r.qps)),
            qc.stroke_width(2),
        ))
        .map_err(err)?
        .label("QPS (auto)")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], qc));
    if let Some((p, q)) = best {
        chart
            .draw_series(LineSeries::new(
                vec![(0.0, q), (tmax, q)],
                bc.stroke_width(1),
            ))
            .map_err(err)?
            .label(format!("QPS of best fixed P={p} (2 CPUs)"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], bc));
    }
    let cut = rows
        .windows(2)
        .find(|w| w[0].server_cpus != w[1].server_cpus)
        .map(|w| w[1].t_s);
    if let Some(t) = cut {
        chart
            .draw_series(LineSeries::new(
                vec![(t, 0.0), (t, qmax)],
                rc.stroke_width(1),
            ))
            .map_err(err)?
            .label("server re-pinned 2 -> 1 CPU")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], rc));
    }
    chart
        .draw_secondary_series(LineSeries::new(
            rows.iter().map(|r| (r.t_s, f64::from(r.limit))),
            lc.stroke_width(2),
        ))
        .map_err(err)?
        .label("limit (right axis)")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], lc));
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// Experiment D: QPS of the active clients against idle connections held, direct vs sluice.
fn idle(path: &Path, rows: &[&LevelResult]) -> Result<()> {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let xmax = rows.iter().filter_map(|r| r.idle_conns).max().unwrap_or(1) as f64 * 1.05 + 1.0;
    let ymax = rows.iter().map(|r| r.qps).fold(1.0, f64::max) * 1.15;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Active throughput vs idle connections held",
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..xmax, 0.0..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("idle connections")
        .y_desc("queries per second (active clients)")
        .draw()
        .map_err(err)?;
    for (i, target) in ["direct", "proxy"].into_iter().enumerate() {
        let pts: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.target == target)
            .map(|r| (r.idle_conns.unwrap_or(0) as f64, r.qps))
            .collect();
        if pts.is_empty() {
            continue;
        }
        let color = COLORS[i % COLORS.len()];
        let label = if target == "proxy" {
            "through sluice"
        } else {
            "direct"
        };
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

fn log_x_range(rows: &[&LevelResult]) -> (f64, f64) {
    let max = rows.iter().map(|r| r.clients).max().unwrap_or(1) as f64;
    (0.8, max * 1.25)
}

fn throughput(path: &Path, rows: &[&LevelResult]) -> Result<()> {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (x0, x1) = log_x_range(rows);
    let ymax = rows.iter().map(|r| r.qps).fold(1.0, f64::max) * 1.15;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Throughput vs connections (one connection per client)",
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d((x0..x1).log_scale(), 0.0..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("concurrent connections C (log scale)")
        .y_desc("queries per second")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .draw()
        .map_err(err)?;
    let pts: Vec<(f64, f64)> = rows.iter().map(|r| (r.clients as f64, r.qps)).collect();
    chart
        .draw_series(LineSeries::new(pts.clone(), COLORS[0].stroke_width(2)))
        .map_err(err)?
        .label("QPS")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], COLORS[0]));
    chart
        .draw_series(pts.iter().map(|&p| Circle::new(p, 4, COLORS[0].filled())))
        .map_err(err)?;
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

fn p99(path: &Path, rows: &[&LevelResult]) -> Result<()> {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (x0, x1) = log_x_range(rows);
    let vals = rows
        .iter()
        .flat_map(|r| [r.p50_ms, r.p99_ms, r.p99_with_inflight_ms]);
    let ymax = vals.clone().fold(1.0, f64::max) * 1.5;
    let ymin = vals
        .filter(|v| *v > 0.0)
        .fold(f64::MAX, f64::min)
        .min(ymax / 10.0)
        * 0.7;
    let mut chart = ChartBuilder::on(&root)
        .caption("Latency vs connections (log-log)", ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d((x0..x1).log_scale(), (ymin..ymax).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("concurrent connections C (log scale)")
        .y_desc("latency, ms (log scale)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.1}"))
        .draw()
        .map_err(err)?;
    type Metric = fn(&LevelResult) -> f64;
    let series: [(&str, Metric); 3] = [
        ("p99", |r| r.p99_ms),
        ("p99 counting in-flight at close", |r| {
            r.p99_with_inflight_ms
        }),
        ("p50", |r| r.p50_ms),
    ];
    for (i, (name, f)) in series.iter().enumerate() {
        let color = COLORS[i];
        let pts: Vec<(f64, f64)> = rows
            .iter()
            .map(|r| (r.clients as f64, f(r).max(ymin)))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(err)?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    root.present().map_err(err)
}

fn pool_vs_direct(path: &Path, bars: &[(String, &LevelResult)]) -> Result<()> {
    let root = SVGBackend::new(path, (SIZE.0, 760)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (top, bottom) = root.split_vertically(420);
    let n = bars.len() as f64;
    let labels: Vec<String> = bars.iter().map(|(l, _)| l.clone()).collect();
    let fmt = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 0.01 && i >= 0.0 {
            labels.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    let ymax = bars
        .iter()
        .map(|(_, r)| r.p99_with_inflight_ms.max(r.p99_ms))
        .fold(1.0, f64::max)
        * 2.0;
    let ymin = bars
        .iter()
        .map(|(_, r)| r.p99_ms)
        .filter(|v| *v > 0.0)
        .fold(f64::MAX, f64::min)
        .min(ymax / 10.0)
        * 0.5;
    let clients = bars.first().map(|(_, r)| r.clients).unwrap_or(0);
    let mut chart = ChartBuilder::on(&top)
        .caption(
            format!("p99 for {clients} clients: direct vs a bounded pool"),
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(35)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.6..n - 0.4, (ymin..ymax).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(bars.len() * 2 + 1)
        .x_label_formatter(&fmt)
        .y_desc("p99 latency, ms (log)")
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (_, r))| {
            let x = i as f64;
            Rectangle::new(
                [(x - 0.3, ymin), (x + 0.3, r.p99_ms.max(ymin))],
                COLORS[if i == 0 { 1 } else { 0 }].filled(),
            )
        }))
        .map_err(err)?
        .label("p99")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], COLORS[0].filled()));
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (_, r))| {
            Cross::new(
                (i as f64, r.p99_with_inflight_ms.max(ymin)),
                6,
                BLACK.stroke_width(2),
            )
        }))
        .map_err(err)?
        .label("p99 counting in-flight at close")
        .legend(|(x, y)| Cross::new((x + 7, y), 5, BLACK.stroke_width(2)));
    legend(&mut chart, SeriesLabelPosition::UpperRight)?;

    let mut served = ChartBuilder::on(&bottom)
        .caption(
            format!("clients (of {clients}) that finished at least one query in the window"),
            ("sans-serif", 18),
        )
        .margin(15)
        .x_label_area_size(35)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.6..n - 0.4, 0.0..(clients as f64 * 1.1).max(1.0))
        .map_err(err)?;
    served
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(bars.len() * 2 + 1)
        .x_label_formatter(&fmt)
        .y_desc("clients served")
        .draw()
        .map_err(err)?;
    served
        .draw_series(bars.iter().enumerate().map(|(i, (_, r))| {
            let x = i as f64;
            Rectangle::new(
                [(x - 0.3, 0.0), (x + 0.3, r.clients_served as f64)],
                COLORS[2].filled(),
            )
        }))
        .map_err(err)?;
    root.present().map_err(err)
}

fn open_loop(path: &Path, rows: &[&LevelResult]) -> Result<()> {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let xs = rows.iter().filter_map(|r| r.rate_fraction);
    let x0 = xs.clone().fold(f64::MAX, f64::min) - 0.1;
    let x1 = xs.fold(0.0, f64::max) + 0.1;
    let vals = rows.iter().flat_map(|r| [r.p50_ms, r.p99_with_inflight_ms]);
    let ymax = vals.clone().fold(1.0, f64::max) * 2.0;
    let ymin = vals
        .filter(|v| *v > 0.0)
        .fold(f64::MAX, f64::min)
        .min(ymax / 10.0)
        * 0.5;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Open loop: latency from the intended start vs offered load",
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, (ymin..ymax).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("offered rate, fraction of the measured peak")
        .y_desc("latency, ms (log scale)")
        .y_label_formatter(&|y| format!("{y:.1}"))
        .draw()
        .map_err(err)?;
    let mut targets: Vec<(String, Vec<&LevelResult>)> = Vec::new();
    for r in rows {
        let key = match r.pool_size {
            Some(p) => format!("pool {p}"),
            None => format!("direct {}", r.clients),
        };
        match targets.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(r),
            None => targets.push((key, vec![r])),
        }
    }
    for (i, (name, rs)) in targets.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let p99: Vec<(f64, f64)> = rs
            .iter()
            .map(|r| {
                (
                    r.rate_fraction.unwrap_or(0.0),
                    r.p99_with_inflight_ms.max(ymin),
                )
            })
            .collect();
        let p50: Vec<(f64, f64)> = rs
            .iter()
            .map(|r| (r.rate_fraction.unwrap_or(0.0), r.p50_ms.max(ymin)))
            .collect();
        chart
            .draw_series(LineSeries::new(p99.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(format!("{name}: p99 incl. unfinished"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(p99.iter().map(|&p| Circle::new(p, 4, color.filled())))
            .map_err(err)?;
        chart
            .draw_series(DashedLineSeries::new(
                p50.clone(),
                6,
                4,
                color.stroke_width(1),
            ))
            .map_err(err)?
            .label(format!("{name}: p50"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    root.present().map_err(err)
}

/// Reads one plotted value from a soak sample.
type SoakValue = fn(&SoakSample) -> f64;

/// The soak: sluice's RSS, open fds, backend connections and the active clients' p99, one
/// panel each, against minutes.
pub fn soak(path: &Path, samples: &[SoakSample]) -> Result<()> {
    let root = SVGBackend::new(path, (900, 1000)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let panels = root.split_evenly((4, 1));
    let series: [(&str, SoakValue); 4] = [
        ("sluice RSS (MiB)", |s| s.rss_mib),
        ("sluice open fds", |s| s.fds as f64),
        ("backend connections", |s| s.backends as f64),
        ("active clients p99 (ms)", |s| s.p99_ms),
    ];
    let xmax = samples.iter().map(|s| s.minute).fold(1.0, f64::max) * 1.02;
    for (i, (panel, (name, value))) in panels.iter().zip(series).enumerate() {
        let pts: Vec<(f64, f64)> = samples.iter().map(|s| (s.minute, value(s))).collect();
        let ymax = pts.iter().map(|p| p.1).fold(1.0, f64::max) * 1.15;
        let mut chart = ChartBuilder::on(panel)
            .caption(name, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..xmax, 0.0..ymax)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("minutes")
            .draw()
            .map_err(err)?;
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(err)?;
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(err)?;
    }
    root.present().map_err(err)
}
