//! Criterion benchmarks of the rule engine: the full decision (the classifier, the Core
//! Rule Set and all nine CMS rule sets) over a realistic request mix, with and without
//! the Core Rule Set, and on the largest requests the components read; one component
//! call, and the hot swap.
//!
//! Run: `cargo bench -p botgate-benches --bench decision`.

use botgate_benches::realistic_mix;
use botgate_host::rules::facts::smoke_facts;
use botgate_host::rules::{CORE_RULE_SET, DirectorySource, Outcome, decide};
use botgate_model::{KNOWN_RULESETS, Policy};
use botgate_tests::{guest_bytes, registry, ruleset_dir, shipped_dir};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::sync::Arc;

fn decision(c: &mut Criterion) {
    let registry = registry();
    let dir = shipped_dir();
    let report = registry.sync(&DirectorySource::new(dir.path()));
    assert!(report.refused.is_empty(), "{report:?}");
    let set = registry.snapshot();
    let mix = realistic_mix();
    let policy = Policy::default();

    let mut group = c.benchmark_group("decision");
    group.throughput(Throughput::Elements(1));
    let mut i = 0usize;
    group.bench_function("full: classifier + crs + 9 rule sets, realistic mix", |b| {
        b.iter(|| {
            let facts = &mix[i % mix.len()].facts;
            i += 1;
            black_box(decide(&set, facts, &KNOWN_RULESETS, &policy))
        })
    });
    // The same work without scopes: every component called for every request, as if
    // each declared an empty scope. Side by side with the line above, it measures what
    // the scopes save.
    let all: Vec<_> = set
        .iter()
        .filter(|c| c.name() != "template")
        .cloned()
        .collect();
    let mut i = 0usize;
    group.bench_function(
        "every component called (scopes ignored), realistic mix",
        |b| {
            b.iter(|| {
                let facts = &mix[i % mix.len()].facts;
                i += 1;
                for component in &all {
                    black_box(component.evaluate(facts));
                }
            })
        },
    );
    // The same decision without the Core Rule Set: side by side with the first line,
    // what `crs` adds to every request.
    let registry_without_crs = botgate_tests::registry();
    let entries: Vec<(&str, &str)> = botgate_tests::shipped()
        .into_iter()
        .filter(|name| *name != CORE_RULE_SET)
        .map(|name| (name, name))
        .collect();
    let dir_without_crs = ruleset_dir(&entries);
    let report = registry_without_crs.sync(&DirectorySource::new(dir_without_crs.path()));
    assert!(report.refused.is_empty(), "{report:?}");
    let set_without_crs = registry_without_crs.snapshot();
    let mut i = 0usize;
    group.bench_function("full without crs, realistic mix", |b| {
        b.iter(|| {
            let facts = &mix[i % mix.len()].facts;
            i += 1;
            black_box(decide(&set_without_crs, facts, &KNOWN_RULESETS, &policy))
        })
    });
    let mut i = 0usize;
    group.bench_function("always-on only (classifier + crs), realistic mix", |b| {
        b.iter(|| {
            let facts = &mix[i % mix.len()].facts;
            i += 1;
            black_box(decide(&set, facts, &[], &policy))
        })
    });
    let template = set.get("template").unwrap().clone();
    let facts = smoke_facts();
    group.bench_function("one call of a small component (template)", |b| {
        b.iter(|| {
            let outcome = template.evaluate(black_box(&facts));
            debug_assert!(!matches!(outcome, Outcome::Failed(_)));
            black_box(outcome)
        })
    });
    group.finish();

    // The full decision of each request of the mix alone: the distribution behind the
    // mix's mean (a page view calls the classifier only; a PHP entry point several rule
    // sets).
    let mut group = c.benchmark_group("decision by request");
    for request in &mix {
        group.bench_function(request.label, |b| {
            b.iter(|| black_box(decide(&set, &request.facts, &KNOWN_RULESETS, &policy)))
        });
    }
    group.finish();

    // The largest requests the components read, each time with values not seen before
    // (remembered verdicts answer nothing): the worst case a call must fit in its deadline.
    let maximal: Vec<Vec<_>> = (0..32).map(botgate_tests::mix::maximal_requests).collect();
    let mut group = c.benchmark_group("decision at the bounds");
    group.sample_size(20);
    for (shape, request) in maximal[0].iter().enumerate() {
        let mut salt = 0usize;
        group.bench_function(request.label, |b| {
            b.iter(|| {
                let facts = &maximal[salt % maximal.len()][shape].facts;
                salt += 1;
                black_box(decide(&set, facts, &KNOWN_RULESETS, &policy))
            })
        });
    }
    group.finish();

    // Each component alone over the same mix: where the time of the full decision goes.
    let mut group = c.benchmark_group("component");
    for name in botgate_tests::shipped() {
        let component = set.get(name).unwrap().clone();
        let mut i = 0usize;
        group.bench_function(name, |b| {
            b.iter(|| {
                let facts = &mix[i % mix.len()].facts;
                i += 1;
                black_box(component.evaluate(facts))
            })
        });
    }
    group.finish();
}

fn hot_swap(c: &mut Criterion) {
    let registry = registry();
    let dir = shipped_dir();
    registry.sync(&DirectorySource::new(dir.path()));
    let v1 = Arc::new(
        registry
            .check("versioned", &guest_bytes("versioned_one"), "bench")
            .unwrap(),
    );
    let v2 = Arc::new(
        registry
            .check("versioned", &guest_bytes("versioned_two"), "bench")
            .unwrap(),
    );
    let mut group = c.benchmark_group("hot_swap");
    let mut flip = false;
    group.bench_function("install a validated component (atomic swap of 12)", |b| {
        b.iter(|| {
            flip = !flip;
            black_box(registry.install(if flip { v1.clone() } else { v2.clone() }))
        })
    });
    let bytes = guest_bytes("versioned_one");
    group.bench_function(
        "load from the compile cache, validate and smoke-test",
        |b| b.iter(|| black_box(registry.check("versioned", &bytes, "bench").unwrap())),
    );
    group.finish();
}

criterion_group!(benches, decision, hot_swap);
criterion_main!(benches);
