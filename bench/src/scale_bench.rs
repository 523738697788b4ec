//! Cost per grant at scale: bytes per live grant and consume latency with a
//! thousand and a million live grants, store by store.

use std::time::Instant;

use countersign_approval_core::{ApprovalStore, AttemptId};
use countersign_store_memory::InMemoryApprovalStore;

use crate::harness::median;
use crate::memory_bench::Fixture;

/// Resident memory of this process, in bytes (Linux `/proc/self/statm`).
fn resident_bytes() -> Result<u64, String> {
    let statm = std::fs::read_to_string("/proc/self/statm").map_err(|e| e.to_string())?;
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .ok_or("unreadable /proc/self/statm")?;
    Ok(pages * 4096)
}

/// One size: bytes per grant (resident growth while issuing `live` grants)
/// and the p50 of `probes` single consumes of further fresh grants.
fn memory_at(f: &Fixture, live: u64, probes: u64) -> Result<(f64, f64), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| e.to_string())?;
    let store = InMemoryApprovalStore::new();
    let before = resident_bytes()?;
    rt.block_on(async {
        // Grants are built one at a time so only the store holds them.
        for i in 0..live {
            let mut g = f.template.clone();
            g.id = countersign_approval_core::ApprovalId::parse(&format!("apr_live{i:024x}"))
                .ok_or("bad id")?;
            store.issue(g).await.map_err(|e| e.to_string())?;
        }
        Ok::<_, String>(())
    })?;
    let grown = resident_bytes()?.saturating_sub(before);
    let probe_grants = f.grants(probes);
    let mut samples = Vec::with_capacity(probe_grants.len());
    rt.block_on(async {
        for g in &probe_grants {
            store.issue(g.clone()).await.map_err(|e| e.to_string())?;
        }
        let attempt = AttemptId::generate().map_err(|e| e.to_string())?;
        for g in &probe_grants {
            let start = Instant::now();
            let outcome = store
                .consume_once(&g.id, &f.binding, f.now, &attempt)
                .await
                .map_err(|e| e.to_string())?;
            samples.push(start.elapsed().as_secs_f64() * 1e6);
            std::hint::black_box(outcome);
        }
        Ok::<_, String>(())
    })?;
    Ok((grown as f64 / live as f64, median(&mut samples)))
}

/// The memory store's section of the scale report.
pub fn memory(quick: bool) -> Result<String, String> {
    let f = Fixture::new()?;
    let sizes: &[u64] = if quick {
        &[1_000, 20_000]
    } else {
        &[1_000, 1_000_000]
    };
    let probes = if quick { 200 } else { 5_000 };
    let mut rows = Vec::new();
    let mut p50s = Vec::new();
    for &live in sizes {
        let (bytes, p50) = memory_at(&f, live, probes)?;
        eprintln!(
            "scale: memory store, {live} live grants: {bytes:.0} bytes per grant, consume p50 {p50:.2} µs"
        );
        rows.push(format!("| {live} | {bytes:.0} | {p50:.2} µs |"));
        p50s.push(p50);
    }
    let ratio = p50s.last().copied().unwrap_or(0.0) / p50s.first().copied().unwrap_or(1.0);
    Ok(format!(
        "### Memory store\n\n\
         Grants with a 10-byte selector and a 1-hour lifetime, issued one by one into one \
         `InMemoryApprovalStore`; bytes per grant are the process's resident growth while \
         issuing divided by the count (the allocator's own overhead included, so the small \
         size reads high); consume p50 is over {probes} single consumes of further fresh \
         grants on one thread.\n\n\
         | live grants | bytes per grant | consume p50 |\n| --- | --- | --- |\n{}\n\n\
         Consume p50 at the largest size is {ratio:.2}× the p50 at the smallest. A purge \
         (`purge`, by an expiry index, in batches of `PURGE_BATCH` = 1024 under the lock) \
         costs in proportion to what it drops, not to the store's size.\n",
        rows.join("\n")
    ))
}
