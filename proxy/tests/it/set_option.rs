//! COM_SET_OPTION (the multi-statements option) is movable session state: two raw clients
//! alternating on one backend each see their own option, nobody is pinned, and
//! COM_RESET_CONNECTION returns to the capability the client logged in with.

use crate::bad_input::Raw;
use crate::harness::*;

const MULTI_ON: [u8; 3] = [0x1b, 0, 0];
const MULTI_OFF: [u8; 3] = [0x1b, 1, 0];
const SERVER_MORE_RESULTS_EXISTS: u16 = 0x0008;

/// Sends COM_SET_OPTION; sluice answers with an EOF (the raw client has no DEPRECATE_EOF).
async fn set_option(raw: &mut Raw, payload: &[u8]) {
    raw.send(0, payload).await;
    let reply = raw.packet().await;
    assert!(
        reply.first() == Some(&0xFE) && reply.len() < 9,
        "COM_SET_OPTION answered with {reply:?}"
    );
}

/// Runs a (possibly multi-statement) text query of one-column, one-row SELECTs; returns each
/// result set's value, or the ERR code.
async fn run(raw: &mut Raw, sql: &str) -> Result<Vec<String>, u16> {
    let mut payload = vec![0x03];
    payload.extend_from_slice(sql.as_bytes());
    raw.send(0, &payload).await;
    let mut values = Vec::new();
    loop {
        let first = raw.packet().await;
        if first.first() == Some(&0xFF) {
            return Err(u16::from_le_bytes([first[1], first[2]]));
        }
        // Column definitions up to an EOF, then rows up to an EOF.
        while !is_eof(&raw.packet().await) {}
        let mut value = String::new();
        loop {
            let row = raw.packet().await;
            if is_eof(&row) {
                let status = u16::from_le_bytes([row[3], row[4]]);
                values.push(value);
                if status & SERVER_MORE_RESULTS_EXISTS == 0 {
                    return Ok(values);
                }
                break;
            }
            let len = row[0] as usize;
            value = String::from_utf8_lossy(&row[1..1 + len]).into_owned();
        }
    }
}

fn is_eof(p: &[u8]) -> bool {
    p.first() == Some(&0xFE) && p.len() < 9
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_statements_option_moves_with_the_session_on_one_backend() {
    let mut cfg = config(1);
    cfg.max_backend_connections = sluice::config::BackendLimit::Fixed(1);
    let proxy = start(cfg).await;
    let mut a = Raw::login(&proxy).await;
    let mut b = Raw::login(&proxy).await;
    const MULTI: &str = "SELECT 1; SELECT 2";
    // Both logged in without CLIENT_MULTI_STATEMENTS: a multi-statement query is a syntax error.
    assert_eq!(run(&mut a, MULTI).await, Err(1064));
    set_option(&mut a, &MULTI_ON).await;
    for _ in 0..3 {
        assert_eq!(run(&mut a, MULTI).await, Ok(vec!["1".into(), "2".into()]));
        // The same backend, its option turned back for b.
        assert_eq!(run(&mut b, MULTI).await, Err(1064));
        assert_eq!(run(&mut b, "SELECT 3").await, Ok(vec!["3".into()]));
    }
    set_option(&mut b, &MULTI_ON).await;
    set_option(&mut a, &MULTI_OFF).await;
    assert_eq!(run(&mut b, MULTI).await, Ok(vec!["1".into(), "2".into()]));
    assert_eq!(run(&mut a, MULTI).await, Err(1064));
    // COM_RESET_CONNECTION goes back to the login capability (off).
    b.send(0, &[0x1f]).await;
    assert_eq!(b.packet().await.first(), Some(&0x00));
    assert_eq!(run(&mut b, MULTI).await, Err(1064));
    let ctx = proxy.context();
    assert_eq!(ctx.pool.snapshot().open, 1, "one backend served both");
    assert!(
        ctx.registry.all().iter().all(|c| c.pin().is_none()),
        "COM_SET_OPTION pins nobody"
    );
    assert!(ctx.stats.replays.load(std::sync::atomic::Ordering::Relaxed) >= 6);
    proxy.shutdown().await;
}
