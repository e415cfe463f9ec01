//! IS_USED_LOCK() names the holder as the holder's own CONNECTION_ID() does: through sluice
//! a session's client id, for a direct (non-sluice) holder its thread id; typed and named
//! as the function itself.

use mysql_async::prelude::*;
use mysql_async::Conn;

use crate::harness::*;
use crate::reference::*;

async fn id_of(c: &mut Conn) -> u64 {
    c.query_first("SELECT CONNECTION_ID()")
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn is_used_lock_names_the_holder_as_its_connection_id_does() {
    for (pool, depth) in CELLS {
        let proxy = sluice_at(pool, depth).await;
        // As many lock holders as slots (each keeps its backend between statements).
        let holders_n = pool as usize;
        let mut holders = Vec::new();
        let mut ids = Vec::new();
        for i in 0..holders_n {
            let mut c = connect(&proxy, None).await;
            let got: Option<i64> = c
                .query_first(format!("SELECT GET_LOCK('iul_{pool}_{depth}_{i}', 5)"))
                .await
                .unwrap();
            assert_eq!(got, Some(1));
            ids.push(id_of(&mut c).await);
            holders.push(c);
        }
        // A lock held by a direct connection keeps its thread id.
        let mut outside = direct(None).await;
        outside
            .query_drop(format!("DO GET_LOCK('iul_{pool}_{depth}_direct', 5)"))
            .await
            .unwrap();
        let outside_id = id_of(&mut outside).await;
        let reads = holders.iter_mut().enumerate().map(|(i, c)| {
            let ids = ids.clone();
            async move {
                let mut wrong = Vec::new();
                for (j, holder) in ids.iter().enumerate() {
                    let name = format!("iul_{pool}_{depth}_{j}");
                    let text: Option<u64> = c
                        .query_first(format!("SELECT IS_USED_LOCK('{name}')"))
                        .await
                        .unwrap();
                    let expr: Option<u64> = c
                        .query_first(format!(
                            "SELECT 1 FROM DUAL WHERE IS_USED_LOCK('{name}') = {holder}"
                        ))
                        .await
                        .unwrap();
                    if text != Some(ids[j]) || expr != Some(1) {
                        wrong.push(format!(
                            "{i} read {name}: {text:?}, where {expr:?}; holder {}",
                            ids[j]
                        ));
                    }
                }
                let direct_name = format!("iul_{pool}_{depth}_direct");
                let held: Option<u64> = c
                    .query_first(format!("SELECT IS_USED_LOCK('{direct_name}')"))
                    .await
                    .unwrap();
                if held != Some(outside_id) {
                    wrong.push(format!(
                        "{i} read the direct holder as {held:?}, not {outside_id}"
                    ));
                }
                let free: Option<Option<u64>> = c
                    .query_first("SELECT IS_USED_LOCK('iul_nobody')")
                    .await
                    .unwrap();
                if free != Some(None) {
                    wrong.push(format!("{i} read a free lock as {free:?}"));
                }
                wrong
            }
        });
        let wrong: Vec<String> = futures_util::future::join_all(reads)
            .await
            .into_iter()
            .flatten()
            .collect();
        assert!(
            wrong.is_empty(),
            "pool_size {pool}, pipeline_depth {depth}:\n{}",
            wrong.join("\n")
        );
        for c in holders {
            c.disconnect().await.unwrap();
        }
        outside.disconnect().await.unwrap();
        proxy.shutdown().await;
    }
}

/// The column a driver sees for IS_USED_LOCK() (name, type, length, flags), through sluice as
/// directly, while a sluice session holds the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn is_used_lock_columns_look_the_same_as_direct() {
    let proxy = sluice_at(2, 1).await;
    let mut shapes = Vec::new();
    for target in [Target::Direct, Target::Sluice(&proxy)] {
        let mut holder = target.connect(None).await;
        let name = format!("iul_shape_{}", target.label());
        holder
            .query_drop(format!("DO GET_LOCK('{name}', 5)"))
            .await
            .unwrap();
        let mut c = target.connect(None).await;
        let mut seen = Vec::new();
        for sql in [
            format!("SELECT IS_USED_LOCK('{name}')"),
            format!("select is_used_lock('{name}') AS h, IS_USED_LOCK('{name}') IS NULL"),
        ] {
            let result = c.query_iter(sql.as_str()).await.unwrap();
            let cols: Vec<String> = result
                .columns_ref()
                .iter()
                .map(|col| {
                    format!(
                        "{} {:?} {:?} len={}",
                        col.name_str().replace(&name, "NAME"),
                        col.column_type(),
                        col.flags(),
                        col.column_length()
                    )
                })
                .collect();
            result.drop_result().await.unwrap();
            seen.push(cols);
        }
        shapes.push(seen);
        holder.disconnect().await.unwrap();
        c.disconnect().await.unwrap();
    }
    assert_eq!(shapes[1], shapes[0], "through sluice as directly");
    proxy.shutdown().await;
}
