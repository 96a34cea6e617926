//! How long the model takes to refuse an over-long list: a website update carrying
//! 256 KiB of subdomains, tags or origin addresses, all distinct or all the same. A
//! list is counted before anything else is done with it, so each is refused in one
//! pass (microseconds), never in time that grows with the square of its length.
//!
//! Run: `cargo bench -p botgate-benches --bench validation`.

use botgate_model::{Website, WebsiteInput};
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;

/// The size of each list, as sent.
const LIST_BYTES: usize = 256 * 1024;

/// Puts a list into the field it is sent as.
type MakeInput = fn(Vec<String>) -> WebsiteInput;

/// Entries made by `entry(i)` until they fill [`LIST_BYTES`] (a comma apart).
fn list(entry: impl Fn(usize) -> String) -> Vec<String> {
    let mut out = Vec::new();
    let mut bytes = 0;
    while bytes < LIST_BYTES {
        let next = entry(out.len());
        bytes += next.len() + 1;
        out.push(next);
    }
    out
}

fn refusals(c: &mut Criterion) {
    let website = Website::create(WebsiteInput {
        domain: Some("example.com".into()),
        user_id: Some("alice".into()),
        ip: Some(vec!["192.0.2.10".into()]),
        ..WebsiteInput::default()
    })
    .expect("a valid website");
    let cases: [(&str, MakeInput, Vec<String>); 5] = [
        (
            "subdomains, distinct",
            subdomains,
            list(|i| format!("s{i}")),
        ),
        (
            "subdomains, all the same",
            subdomains,
            list(|_| "www".into()),
        ),
        ("tags, distinct", tags, list(|i| format!("t{i}"))),
        ("tags, all the same", tags, list(|_| "dc1".into())),
        (
            "origin addresses, distinct",
            ips,
            list(|i| format!("10.{}.{}.{}", i >> 16 & 255, i >> 8 & 255, i & 255)),
        ),
    ];
    let mut group = c.benchmark_group("refusing a 256 KiB list");
    for (name, input, entries) in cases {
        group.bench_function(name, |b| {
            b.iter_batched(
                || (website.clone(), input(entries.clone())),
                |(mut website, input)| {
                    let refused = website.apply(input);
                    assert!(refused.is_err());
                    black_box(refused)
                },
                criterion::BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

fn subdomains(list: Vec<String>) -> WebsiteInput {
    WebsiteInput {
        subdomain: Some(list),
        ..WebsiteInput::default()
    }
}

fn tags(list: Vec<String>) -> WebsiteInput {
    WebsiteInput {
        tag: Some(list),
        ..WebsiteInput::default()
    }
}

fn ips(list: Vec<String>) -> WebsiteInput {
    WebsiteInput {
        ip: Some(list),
        ..WebsiteInput::default()
    }
}

criterion_group!(benches, refusals);
criterion_main!(benches);
