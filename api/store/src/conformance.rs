//! The conformance suite every backend passes: the behaviour of [`Store`] written once.
//! Backend tests call [`run`] on a fresh, empty store; it panics on the first
//! difference, naming it.

use crate::{
    Changed, ClaimShares, Delivery, HostClash, HostField, PartnerChange, PartnerRecord, Store,
    StoreError,
};
use botgate_model::{Domain, FrameOrigin, PartnerName, User, UserId, Website, WebsiteInput};
use tokio::sync::broadcast::error::TryRecvError;

/// A partner record for tests (a made-up key digest and secret).
pub fn partner(name: &str) -> PartnerRecord {
    PartnerRecord {
        name: PartnerName::parse(name).unwrap(),
        key_sha256: format!("{:0>64}", name.len()),
        webhook_secret: format!("whsec_{name}"),
        frame_origins: Vec::new(),
    }
}

/// A user of `partner` for tests, with a key derived from its names.
pub fn user(partner: &PartnerRecord, id: &str) -> User {
    User::create(
        id,
        partner.name.clone(),
        format!("key-of-{}-{id}", partner.name.as_str()),
        vec![],
    )
    .unwrap()
}

/// Asserts that `record`, the answer of a write, is the record as `store` holds it.
pub async fn assert_as_stored<S: Store>(store: &S, record: &crate::WebsiteRecord) {
    assert_eq!(
        store
            .website(&record.website.domain)
            .await
            .unwrap()
            .as_ref(),
        Some(record),
        "the answer is the record as stored"
    );
}

/// A website of `user` for tests, with one origin and every default.
pub fn website(domain: &str, user: &User) -> Website {
    Website::create(WebsiteInput {
        domain: Some(domain.into()),
        user_id: Some(user.id.as_str().into()),
        ip: Some(vec!["192.0.2.10".into()]),
        ..WebsiteInput::default()
    })
    .unwrap()
}

/// [`website`] in `setup`, holding `callbacks` for the end of its work.
pub fn website_holding(domain: &str, user: &User, callbacks: &[&str]) -> Website {
    let mut site = website(domain, user);
    site.begin_setup(1, "waiting".into());
    if let Some(pending) = &mut site.pending {
        pending
            .callbacks
            .extend(callbacks.iter().map(|url| url.to_string()));
    }
    site
}

fn domain(d: &str) -> Domain {
    Domain::parse(d).unwrap()
}

/// Stores partner `partner` and its user `id`, for tests that need someone to own
/// websites.
pub async fn partner_and_user<S: Store>(
    store: &S,
    partner_name: &str,
    id: &str,
) -> (PartnerRecord, User) {
    let record = partner(partner_name);
    store.put_partner(&record).await.unwrap();
    let owner = user(&record, id);
    store.create_user(&owner).await.unwrap();
    (record, owner)
}

/// Runs every check against `store`, which must be empty.
pub async fn run<S: Store>(store: &S) {
    partners(store).await;
    users_and_tenants(store).await;
    websites(store).await;
    change_feed(store).await;
    deleting_a_user_deletes_its_websites(store).await;
    shared_secrets(store).await;
    outbox(store).await;
    outbox_shares(store).await;
    ephemeral_values_and_leases(store).await;
    host_names(store).await;
    field_level_partner_writes(store).await;
    counters(store).await;
    traffic(store).await;
    rulesets(store).await;
    quotas(store).await;
    held_callbacks(store).await;
    user_keys(store).await;
    deleting_a_user_of_many_websites(store).await;
    error_words_in_values(store).await;
}

/// A partner's value that spells a store error's word is only a value: a website for
/// a user `XCONFLICTX` that does not exist is refused as not found, not as a conflict.
async fn error_words_in_values<S: Store>(store: &S) {
    let (words, walter) = partner_and_user(store, "errorwords", "walter").await;
    for id in ["XCONFLICTX", "STALE", "FULL", "HOSTTAKEN"] {
        let mut site = website(&format!("{}.words.example", id.to_lowercase()), &walter);
        site.user_id = UserId::parse(id).unwrap();
        let refused = store.create_website(&words.name, &site).await;
        assert!(
            matches!(&refused, Err(crate::StoreError::NotFound(what)) if what.contains(id)),
            "{refused:?}"
        );
    }
}

/// A user of more websites than one write deletes: all go, a batch a write, and the
/// user with the last; its host names are free again, and the change feed names every
/// website once.
async fn deleting_a_user_of_many_websites<S: Store>(store: &S) {
    let (hoster, many) = partner_and_user(store, "batch-hoster", "many").await;
    let count = 2 * crate::DELETED_PER_WRITE + 7;
    let mut domains: Vec<Domain> = Vec::new();
    for n in 0..count {
        let site = website_with(&format!("site{n}.many.example"), &many, &["www"]);
        store.create_website(&hoster.name, &site).await.unwrap();
        domains.push(site.domain);
    }
    let mut feed = store.subscribe();
    // The creations' changes may still be on their way (Redis relays them): only what
    // comes after counts.
    let before = store.version().await.unwrap();
    let mut deleted = store.delete_user(&hoster.name, &many.id).await.unwrap();
    deleted.sort();
    domains.sort();
    assert_eq!(deleted, domains);
    assert_eq!(store.user(&hoster.name, &many.id).await.unwrap(), None);
    assert!(
        store
            .websites(&hoster.name, None, None, 1000)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let after = store.version().await.unwrap();
    let mut seen = std::collections::BTreeSet::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while seen.len() < count {
        let change = tokio::time::timeout_at(deadline, feed.recv())
            .await
            .expect("every deletion is in the change feed")
            .unwrap();
        if let Changed::Website { domain } = change.what
            && change.version > before
        {
            assert!(seen.insert(domain), "a website named twice");
        }
        assert!(change.version <= after, "a change after the deletion");
    }
    // Its names are free.
    let (other, eve) = partner_and_user(store, "batch-neighbour", "eve").await;
    let again = website_with("site0.many.example", &eve, &["www"]);
    store
        .create_website(&other.name, &again)
        .await
        .expect("a deleted user's host names are free");
}

/// A user's key replaced: the old one finds nobody at once, the new one the user (as
/// read by id too); another user's key, or a user who is not there, is refused.
async fn user_keys<S: Store>(store: &S) {
    let (hoster, ann) = partner_and_user(store, "key-hoster", "ann").await;
    let bob = user(&hoster, "bob");
    store.create_user(&bob).await.unwrap();
    let replaced = store
        .replace_user_key(&hoster.name, &ann.id, "key-of-ann-2")
        .await
        .unwrap();
    assert_eq!(
        replaced,
        User {
            api_key: "key-of-ann-2".into(),
            ..ann.clone()
        }
    );
    assert_eq!(store.user_by_key(&ann.api_key).await.unwrap(), None);
    assert_eq!(
        store.user_by_key("key-of-ann-2").await.unwrap(),
        Some(replaced.clone())
    );
    assert_eq!(
        store.user(&hoster.name, &ann.id).await.unwrap(),
        Some(replaced.clone())
    );
    assert!(matches!(
        store
            .replace_user_key(&hoster.name, &ann.id, &bob.api_key)
            .await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(
        store.user_by_key(&bob.api_key).await.unwrap(),
        Some(bob.clone())
    );
    let nobody = UserId::parse("nobody").unwrap();
    assert!(matches!(
        store
            .replace_user_key(&hoster.name, &nobody, "key-of-nobody")
            .await,
        Err(StoreError::NotFound(_))
    ));
    // Deleting the user afterwards frees the new key, not the old.
    store.delete_user(&hoster.name, &ann.id).await.unwrap();
    assert_eq!(store.user_by_key("key-of-ann-2").await.unwrap(), None);
}

fn pushed(name: &str, version: &str, bytes: &[u8]) -> crate::rulesets::PushedRuleset {
    crate::rulesets::PushedRuleset {
        name: name.into(),
        version: version.into(),
        sha256: crate::sha256_hex(bytes),
        size: bytes.len() as u64,
        pushed_by: "ops@admin".into(),
        pushed_at_ms: 1_795_000_000_000 + bytes.len() as u64,
        signature: None,
    }
}

/// Pushed versions are kept by content and never replaced; a state changes only from
/// the revision its writer read, and every change raises the one revision; a version in
/// service cannot be removed, and bytes go with their last version.
async fn rulesets<S: Store>(store: &S) {
    use crate::rulesets::{FailurePolicy, Pushed, RulesetState, Shadow};
    assert_eq!(store.rulesets_revision().await.unwrap(), 0);
    assert!(
        store
            .pushed_rulesets()
            .await
            .unwrap()
            .whole()
            .unwrap()
            .is_empty()
    );
    let (one, two) = (b"\0asm one".as_slice(), b"\0asm two, longer".as_slice());
    let first = pushed("wordpress", "1.0.0", one);
    assert_eq!(
        store.push_ruleset(&first, one).await.unwrap(),
        Pushed::Stored
    );
    assert_eq!(
        store.push_ruleset(&first, one).await.unwrap(),
        Pushed::AlreadyStored
    );
    let replaced = pushed("wordpress", "1.0.0", two);
    assert!(matches!(
        store.push_ruleset(&replaced, two).await,
        Err(StoreError::Conflict(_))
    ));
    let second = pushed("wordpress", "2.0.0", two);
    store.push_ruleset(&second, two).await.unwrap();
    // The same bytes under another name share their storage.
    let copy = pushed("drupal", "2.0.0", two);
    store.push_ruleset(&copy, two).await.unwrap();
    assert_eq!(
        store.pushed_rulesets().await.unwrap().whole().unwrap(),
        vec![copy.clone(), first.clone(), second.clone()]
    );
    assert_eq!(
        store.ruleset_bytes(&first.sha256).await.unwrap().as_deref(),
        Some(one)
    );
    assert_eq!(store.ruleset_bytes(&"0".repeat(64)).await.unwrap(), None);

    let state = RulesetState {
        active: Some("1.0.0".into()),
        changed_by: "ops".into(),
        changed_at_ms: 1,
        ..RulesetState::default()
    };
    let revision = store
        .put_ruleset_state("wordpress", 0, &state)
        .await
        .unwrap();
    assert_eq!(store.rulesets_revision().await.unwrap(), revision);
    assert!(matches!(
        store.put_ruleset_state("wordpress", 0, &state).await,
        Err(StoreError::Stale(_))
    ));
    let next = RulesetState {
        active: Some("2.0.0".into()),
        previous: vec!["1.0.0".into()],
        shadow: Some(Shadow {
            version: "1.0.0".into(),
            percent: 10,
        }),
        failure: FailurePolicy::Closed,
        ..state.clone()
    };
    let later = store
        .put_ruleset_state("wordpress", revision, &next)
        .await
        .unwrap();
    assert!(later > revision);
    let states = store.ruleset_states().await.unwrap().whole().unwrap();
    assert_eq!(states.len(), 1);
    assert_eq!(states["wordpress"].state, next);
    assert_eq!(states["wordpress"].revision, later);
    assert_eq!(store.rulesets_revision().await.unwrap(), later);

    // Versions in service stay; others go, their bytes with the last of them.
    for running in ["1.0.0", "2.0.0"] {
        assert!(matches!(
            store.remove_ruleset("wordpress", running).await,
            Err(StoreError::Conflict(_))
        ));
    }
    // A removal moves the name's revision: a change read before it is stale.
    store.put_ruleset_state("drupal", 0, &state).await.unwrap();
    let read = store.ruleset_states().await.unwrap().whole().unwrap()["drupal"].revision;
    assert!(store.remove_ruleset("drupal", "2.0.0").await.unwrap());
    assert!(!store.remove_ruleset("drupal", "2.0.0").await.unwrap());
    assert!(matches!(
        store.put_ruleset_state("drupal", read, &state).await,
        Err(StoreError::Stale(_))
    ));
    // A signature that comes with bytes stored unsigned is kept.
    let signed = crate::rulesets::PushedRuleset {
        signature: Some("c2lnbmF0dXJl".into()),
        ..second.clone()
    };
    assert_eq!(
        store.push_ruleset(&signed, two).await.unwrap(),
        Pushed::AlreadyStored
    );
    let stored = store.pushed_rulesets().await.unwrap().whole().unwrap();
    assert!(
        stored
            .iter()
            .any(|p| p.key() == second.key() && p.signature.is_some())
    );
    assert!(store.ruleset_bytes(&second.sha256).await.unwrap().is_some());
    store
        .put_ruleset_state(
            "wordpress",
            later,
            &RulesetState {
                shadow: None,
                ..next
            },
        )
        .await
        .unwrap();
    assert!(store.remove_ruleset("wordpress", "1.0.0").await.unwrap());
    assert_eq!(store.ruleset_bytes(&first.sha256).await.unwrap(), None);
    assert_eq!(
        store.pushed_rulesets().await.unwrap().whole().unwrap(),
        vec![signed.clone()]
    );

    // Shadow results add up across gateways; the latest samples are kept, newest first.
    use crate::rulesets::{SHADOW_SAMPLES_KEPT, ShadowResults, ShadowSample};
    let sample = |n: u64| ShadowSample {
        at_ms: n,
        website: "a.example".into(),
        method: "GET".into(),
        target: format!("/{n}"),
        active: "humans (classifier.browser)".into(),
        shadow: "abstain".into(),
    };
    assert_eq!(
        store.shadow_results("wordpress", "3.0.0").await.unwrap(),
        ShadowResults::default()
    );
    for flush in 0..3u64 {
        let results = ShadowResults {
            counts: [
                ("humans -> abstain".to_owned(), 2),
                ("humans -> humans".to_owned(), 5),
            ]
            .into(),
            samples: (flush * 30..flush * 30 + 30).map(sample).collect(),
        };
        store
            .add_shadow_results("wordpress", "3.0.0", &results)
            .await
            .unwrap();
    }
    let results = store.shadow_results("wordpress", "3.0.0").await.unwrap();
    assert_eq!(results.counts["humans -> abstain"], 6);
    assert_eq!(results.counts["humans -> humans"], 15);
    assert_eq!(results.samples.len(), SHADOW_SAMPLES_KEPT);
    assert_eq!(results.samples[0], sample(89));
    assert_eq!(
        store.shadow_results("wordpress", "2.0.0").await.unwrap(),
        ShadowResults::default()
    );
    // They go with their version.
    let third = pushed("wordpress", "3.0.0", b"\0asm three");
    store.push_ruleset(&third, b"\0asm three").await.unwrap();
    assert!(store.remove_ruleset("wordpress", "3.0.0").await.unwrap());
    assert_eq!(
        store.shadow_results("wordpress", "3.0.0").await.unwrap(),
        ShadowResults::default()
    );
}

fn traffic_event(n: u64) -> crate::TrafficEvent {
    crate::TrafficEvent {
        time: 1_795_000_000_000 + n,
        client: "203.0.113.7".into(),
        method: "GET".into(),
        path: format!("/page/{n}"),
        category: Some("humans".into()),
        action: "grant".into(),
        decider: Some("classifier".into()),
        reason: "classifier.browser".into(),
        status: 200,
    }
}

fn counts(fields: &[(&str, u64)]) -> crate::Counts {
    crate::Counts(fields.iter().map(|(f, c)| (f.to_string(), *c)).collect())
}

/// Traffic counters add up per bucket (decisions in minutes and hours, top lists in
/// hours only), the latest events come newest first, and both stay bounded.
async fn traffic<S: Store>(store: &S) {
    use crate::Resolution::{Hour, Minute};
    let site = domain("counted.example");
    let other = domain("other-counted.example");
    let counting = partner("traffic-hoster");
    store.put_partner(&counting).await.unwrap();
    let counted = user(&counting, "traffic-owner");
    store.create_user(&counted).await.unwrap();
    for name in [&site, &other] {
        store
            .create_website(&counting.name, &website(name.as_str(), &counted))
            .await
            .unwrap();
    }
    let counted_owner = crate::Owner {
        partner: &counting.name,
        user: &counted.id,
    };
    let minute = 29_916_667; // 2026-11-18T…, the start of an hour plus 7 minutes
    store
        .add_traffic(
            &site,
            counted_owner,
            minute,
            &counts(&[
                ("c:humans:grant", 3),
                ("ch:shown", 1),
                ("p:/", 3),
                ("u:Mozilla/5.0", 3),
            ]),
            &[traffic_event(1), traffic_event(2)],
        )
        .await
        .unwrap();
    store
        .add_traffic(
            &site,
            counted_owner,
            minute,
            &counts(&[("c:humans:grant", 2), ("c:none:bad_request", 1), ("p:/", 1)]),
            &[traffic_event(3)],
        )
        .await
        .unwrap();
    store
        .add_traffic(
            &other,
            counted_owner,
            minute,
            &counts(&[("c:humans:deny", 9)]),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        store
            .traffic(&site, Minute, minute - 1, minute)
            .await
            .unwrap(),
        vec![
            crate::Counts::default(),
            counts(&[
                ("c:humans:grant", 5),
                ("c:none:bad_request", 1),
                ("ch:shown", 1)
            ])
        ]
    );
    assert_eq!(
        store
            .traffic(&site, Hour, minute / 60, minute / 60)
            .await
            .unwrap(),
        vec![counts(&[
            ("c:humans:grant", 5),
            ("c:none:bad_request", 1),
            ("ch:shown", 1),
            ("p:/", 4),
            ("u:Mozilla/5.0", 3)
        ])]
    );
    let paths = |events: Vec<crate::TrafficEvent>| -> Vec<String> {
        events.into_iter().map(|e| e.path).collect()
    };
    assert_eq!(
        paths(store.events(&site, 10).await.unwrap()),
        ["/page/3", "/page/2", "/page/1"]
    );
    assert_eq!(
        store.events(&site, 1).await.unwrap(),
        vec![traffic_event(3)]
    );
    assert!(store.events(&other, 10).await.unwrap().is_empty());
    assert!(
        store
            .events(&domain("quiet.example"), 10)
            .await
            .unwrap()
            .is_empty()
            && store
                .traffic(&domain("quiet.example"), Hour, 1, 3)
                .await
                .unwrap()
                == vec![crate::Counts::default(); 3]
    );

    // Bounded: the latest events only; an hour bucket's fields, new ones dropped when
    // it is full while the ones it has keep counting.
    let many: Vec<crate::TrafficEvent> = (10..10 + crate::traffic::EVENTS_KEPT as u64 + 10)
        .map(traffic_event)
        .collect();
    store
        .add_traffic(
            &site,
            counted_owner,
            minute,
            &crate::Counts::default(),
            &many,
        )
        .await
        .unwrap();
    let kept = store.events(&site, 10_000).await.unwrap();
    assert_eq!(kept.len(), crate::traffic::EVENTS_KEPT);
    assert_eq!(kept[0], *many.last().unwrap());
    let flood = crate::Counts(
        (0..crate::traffic::TOP_LIST_ENTRIES + 50)
            .map(|n| (format!("p:/flood/{n}"), 1))
            .chain([("p:/".to_owned(), 1)])
            .collect(),
    );
    store
        .add_traffic(&site, counted_owner, minute, &flood, &[])
        .await
        .unwrap();
    let hour = store
        .traffic(&site, Hour, minute / 60, minute / 60)
        .await
        .unwrap();
    assert_eq!(hour[0].0.get("p:/"), Some(&5));
    let paths = hour[0]
        .0
        .keys()
        .filter(|field| field.starts_with("p:"))
        .count();
    assert_eq!(paths, crate::traffic::TOP_LIST_ENTRIES);
    // Another list, and the counters, still take new entries in the full bucket.
    store
        .add_traffic(
            &site,
            counted_owner,
            minute,
            &counts(&[("n:198.51.100.0/24", 1), ("c:humans:deny", 1)]),
            &[],
        )
        .await
        .unwrap();
    let hour = store
        .traffic(&site, Hour, minute / 60, minute / 60)
        .await
        .unwrap();
    assert_eq!(hour[0].0.get("n:198.51.100.0/24"), Some(&1));
    assert_eq!(hour[0].0.get("c:humans:deny"), Some(&1));

    // A deleted website's statistics and requests go with it (a later website of the
    // same name, another owner's perhaps, starts with none); a deleted user's too.
    let owner_partner = partner("counting-hoster");
    store.put_partner(&owner_partner).await.unwrap();
    let owner = user(&owner_partner, "counted-owner");
    store.create_user(&owner).await.unwrap();
    let its_owner = crate::Owner {
        partner: &owner_partner.name,
        user: &owner.id,
    };
    let now_minute = crate::now_ms() / 60_000;
    for name in ["deleted-counted.example", "owner-counted.example"] {
        let gone = domain(name);
        store
            .create_website(&owner_partner.name, &website(name, &owner))
            .await
            .unwrap();
        store
            .add_traffic(
                &gone,
                its_owner,
                now_minute,
                &counts(&[("c:humans:grant", 1), ("p:/", 1)]),
                &[traffic_event(1)],
            )
            .await
            .unwrap();
        assert_eq!(store.events(&gone, 10).await.unwrap().len(), 1);
    }
    store
        .delete_website(&domain("deleted-counted.example"), None)
        .await
        .unwrap();
    store
        .delete_user(&owner_partner.name, &owner.id)
        .await
        .unwrap();
    let nothing_kept = |name: &'static str| async move {
        let gone = domain(name);
        assert!(store.events(&gone, 10).await.unwrap().is_empty(), "{name}");
        for (resolution, number) in [(Minute, now_minute), (Hour, now_minute / 60)] {
            assert_eq!(
                store
                    .traffic(&gone, resolution, number, number)
                    .await
                    .unwrap(),
                vec![crate::Counts::default()],
                "{name}"
            );
        }
    };
    for name in ["deleted-counted.example", "owner-counted.example"] {
        nothing_kept(name).await;
    }
    // A gateway's counts that arrive after the deletion (its last flush) are dropped,
    // and a website created under the name starts with none, whatever was left.
    let late = domain("deleted-counted.example");
    store
        .add_traffic(
            &late,
            its_owner,
            now_minute,
            &counts(&[("c:humans:grant", 1), ("p:/secret", 1)]),
            &[traffic_event(7)],
        )
        .await
        .unwrap();
    nothing_kept("deleted-counted.example").await;
    let next_owner = user(&counting, "next-owner");
    store.create_user(&next_owner).await.unwrap();
    store
        .add_traffic(
            &site,
            counted_owner,
            now_minute,
            &counts(&[("c:humans:grant", 1)]),
            &[traffic_event(8)],
        )
        .await
        .unwrap();
    store.delete_website(&site, None).await.unwrap();
    store
        .create_website(&counting.name, &website(site.as_str(), &next_owner))
        .await
        .unwrap();
    nothing_kept("counted.example").await;
    // Counts a gateway recorded for the last owner and flushes after the name was
    // taken again (by another user of the partner, or by another partner) are not
    // the new owner's; the new owner's own counts are.
    let last_owners_counts = counts(&[("c:humans:grant", 1), ("p:/last-owners-page", 1)]);
    let last_owners_events = [traffic_event(9)];
    let late_for_last_owner = || {
        store.add_traffic(
            &site,
            counted_owner,
            now_minute,
            &last_owners_counts,
            &last_owners_events,
        )
    };
    late_for_last_owner().await.unwrap();
    nothing_kept("counted.example").await;
    let rival = partner("traffic-rival");
    store.put_partner(&rival).await.unwrap();
    let rivals_user = user(&rival, "traffic-owner");
    store.create_user(&rivals_user).await.unwrap();
    store.delete_website(&site, None).await.unwrap();
    store
        .create_website(&rival.name, &website(site.as_str(), &rivals_user))
        .await
        .unwrap();
    late_for_last_owner().await.unwrap();
    nothing_kept("counted.example").await;
    let rivals_owner = crate::Owner {
        partner: &rival.name,
        user: &rivals_user.id,
    };
    store
        .add_traffic(
            &site,
            rivals_owner,
            now_minute,
            &counts(&[("c:humans:grant", 2)]),
            &[traffic_event(10)],
        )
        .await
        .unwrap();
    assert_eq!(
        store
            .traffic(&site, Minute, now_minute, now_minute)
            .await
            .unwrap(),
        vec![counts(&[("c:humans:grant", 2)])]
    );
    assert_eq!(
        store.events(&site, 10).await.unwrap(),
        vec![traffic_event(10)]
    );
}

/// A partner's users and websites are bounded when the caller asks: a creation past
/// the bound is [`crate::StoreError::AtLimit`] naming the partner, what and how many;
/// refused and deleted ones do not count; other partners are not held up.
async fn quotas<S: Store>(store: &S) {
    let at_limit = |result: Result<(), crate::StoreError>, partner: &str, what: &str| {
        assert!(
            matches!(&result, Err(crate::StoreError::AtLimit(message))
                if message == &format!("partner {partner} holds 2 {what}, the most allowed")),
            "{result:?}"
        );
    };
    let (quota, first) = partner_and_user(store, "quota-hoster", "first").await;
    let second = user(&quota, "second");
    store.create_user_within(&second, 2).await.unwrap();
    let third = user(&quota, "third");
    at_limit(
        store.create_user_within(&third, 2).await,
        "quota-hoster",
        "users",
    );
    assert!(store.user(&quota.name, &third.id).await.unwrap().is_none());
    let (other, _) = partner_and_user(store, "quota-neighbour", "first").await;
    store
        .create_user_within(&user(&other, "second"), 2)
        .await
        .expect("another partner's users are its own");
    store.delete_user(&quota.name, &second.id).await.unwrap();
    store
        .create_user_within(&third, 2)
        .await
        .expect("room again");

    let partner = &quota.name;
    let create = |name: &str, owner: &User| {
        let site = website(name, owner);
        async move {
            store
                .create_website_within(
                    partner,
                    &site,
                    crate::WebsiteLimits {
                        websites: 2,
                        held_callbacks: usize::MAX,
                    },
                )
                .await
                .map(|_| ())
        }
    };
    create("one.quota.example", &first).await.unwrap();
    // A refusal for another reason does not count.
    assert!(matches!(
        create("one.quota.example", &third).await,
        Err(crate::StoreError::Conflict(_))
    ));
    create("two.quota.example", &third).await.unwrap();
    at_limit(
        create("three.quota.example", &first).await,
        "quota-hoster",
        "websites",
    );
    assert!(
        store
            .website(&domain("three.quota.example"))
            .await
            .unwrap()
            .is_none()
    );
    store
        .delete_website(&domain("one.quota.example"), None)
        .await
        .unwrap();
    create("three.quota.example", &first)
        .await
        .expect("room again");
    // A deleted user's websites leave room too.
    store.delete_user(&quota.name, &third.id).await.unwrap();
    create("four.quota.example", &first).await.unwrap();
    at_limit(
        create("five.quota.example", &first).await,
        "quota-hoster",
        "websites",
    );
}

/// The `callbackUrl`s a partner's websites in `setup` hold are bounded when the caller
/// asks: a create or an update that adds past the bound is [`StoreError::Full`] naming
/// the partner and how many it has, and writes nothing; a write that adds none is never
/// refused; callbacks released, and websites or users deleted, leave room; other
/// partners are not held up.
async fn held_callbacks<S: Store>(store: &S) {
    let full = |result: Result<crate::WebsiteRecord, StoreError>, held: u64| {
        assert!(
            matches!(&result, Err(StoreError::Full(message))
                if message == &format!("partner callback-hoster has {held} `callbackUrl`s \
                    waiting for its websites in `setup`, the most allowed")),
            "{result:?}"
        );
    };
    let limits = crate::WebsiteLimits {
        websites: usize::MAX,
        held_callbacks: 3,
    };
    let (hoster, alice) = partner_and_user(store, "callback-hoster", "alice").await;
    let (a, b, c) = (
        "https://hooks.example/a",
        "https://hooks.example/b",
        "https://hooks.example/c",
    );
    let partner = &hoster.name;
    let one = website_holding("one.held.example", &alice, &[a, b]);
    let one = store
        .create_website_within(partner, &one, limits)
        .await
        .unwrap();
    full(
        store
            .create_website_within(
                partner,
                &website_holding("two.held.example", &alice, &[a, b]),
                limits,
            )
            .await,
        2,
    );
    assert!(
        store
            .website(&domain("two.held.example"))
            .await
            .unwrap()
            .is_none()
    );
    let two = store
        .create_website_within(
            partner,
            &website_holding("two.held.example", &alice, &[c]),
            limits,
        )
        .await
        .unwrap();
    // Adding past the bound is refused and leaves the record as it was.
    let mut more = two.website.clone();
    more.pending.as_mut().unwrap().callbacks.push(a.into());
    full(store.update_website_within(&more, two.revision, 3).await, 3);
    assert_as_stored(store, &two).await;
    // A write that adds none goes through at the bound.
    let mut renamed = two.website.clone();
    renamed.status_reason = Some("still waiting".into());
    let two = store
        .update_website_within(&renamed, two.revision, 3)
        .await
        .unwrap();
    // Another partner holds its own.
    let (neighbour, bob) = partner_and_user(store, "callback-neighbour", "bob").await;
    store
        .create_website_within(
            &neighbour.name,
            &website_holding("three.held.example", &bob, &[a, b, c]),
            limits,
        )
        .await
        .expect("another partner's callbacks are its own");
    // The end of the work releases one's two.
    let mut finished = one.website.clone();
    assert_eq!(finished.finish_setup(Ok(())), [a, b]);
    store.update_website(&finished, one.revision).await.unwrap();
    let mut more = two.website.clone();
    more.pending
        .as_mut()
        .unwrap()
        .callbacks
        .extend([a.to_string(), b.to_string()]);
    let two = store
        .update_website_within(&more, two.revision, 3)
        .await
        .expect("room again");
    full(
        store
            .create_website_within(
                partner,
                &website_holding("four.held.example", &alice, &[a]),
                limits,
            )
            .await,
        3,
    );
    store
        .delete_website(&two.website.domain, None)
        .await
        .unwrap();
    let carol = user(&hoster, "carol");
    store.create_user(&carol).await.unwrap();
    store
        .create_website_within(
            partner,
            &website_holding("four.held.example", &carol, &[a, b, c]),
            limits,
        )
        .await
        .expect("a deleted website's callbacks leave room");
    store.delete_user(partner, &carol.id).await.unwrap();
    store
        .create_website_within(
            partner,
            &website_holding("five.held.example", &alice, &[a, b, c]),
            limits,
        )
        .await
        .expect("a deleted user's websites' callbacks leave room");
}

/// Counters in a window: each count adds one, the window's end is set by the first.
async fn counters<S: Store>(store: &S) {
    let now = crate::now_ms();
    for expected in 1..=3 {
        assert_eq!(
            store.count("orders:a", now + 60_000).await.unwrap(),
            expected
        );
    }
    assert_eq!(store.count("orders:b", now + 60_000).await.unwrap(), 1);
    // A window that has ended starts again from one.
    assert_eq!(store.count("orders:brief", now + 40).await.unwrap(), 1);
    tokio::time::sleep(std::time::Duration::from_millis(80)).await;
    assert_eq!(store.count("orders:brief", now + 60_000).await.unwrap(), 1);
    assert_eq!(store.count("orders:brief", now + 60_000).await.unwrap(), 2);
}

/// A partner's key and webhook secret change alone: a write that read the record before
/// the other field changed never brings the old value back.
async fn field_level_partner_writes<S: Store>(store: &S) {
    let record = partner("rotating");
    store.put_partner(&record).await.unwrap();
    // Two writers read the same record; the operator rotates the key, then the API
    // rotates the webhook secret from its earlier read.
    let read_by_api = store.partner(&record.name).await.unwrap().unwrap();
    let new_key = "f".repeat(64);
    store
        .update_partner(
            &record.name,
            PartnerChange::Key {
                key_sha256: new_key.clone(),
            },
        )
        .await
        .unwrap();
    let after = store
        .update_partner(
            &read_by_api.name,
            PartnerChange::WebhookSecret("whsec_rotated".into()),
        )
        .await
        .unwrap();
    assert_eq!(
        after.key_sha256, new_key,
        "the rotated key was brought back"
    );
    assert_eq!(after.webhook_secret, "whsec_rotated");
    assert_eq!(store.partner(&record.name).await.unwrap(), Some(after));
    assert_eq!(
        store.partner_by_key(&read_by_api.key_sha256).await.unwrap(),
        None,
        "the old key still works"
    );
    assert_eq!(
        store
            .partner_by_key(&new_key)
            .await
            .unwrap()
            .map(|p| p.webhook_secret),
        Some("whsec_rotated".to_owned())
    );
    // The other order: the secret first, then the key from an earlier read.
    store
        .update_partner(
            &record.name,
            PartnerChange::WebhookSecret("whsec_third".into()),
        )
        .await
        .unwrap();
    let after = store
        .update_partner(
            &record.name,
            PartnerChange::Key {
                key_sha256: "e".repeat(64),
            },
        )
        .await
        .unwrap();
    assert_eq!(after.webhook_secret, "whsec_third");
    // The panel origins: a list, then none (which Redis's Lua would write as `{}`),
    // each keeping the key and the secret.
    let origins =
        FrameOrigin::parse_list(&["https://panel.example", "http://127.0.0.1:8080"]).unwrap();
    let after = store
        .update_partner(&record.name, PartnerChange::FrameOrigins(origins.clone()))
        .await
        .unwrap();
    assert_eq!(after.frame_origins, origins);
    assert_eq!(after.webhook_secret, "whsec_third");
    assert_eq!(store.partner(&record.name).await.unwrap(), Some(after));
    let after = store
        .update_partner(&record.name, PartnerChange::FrameOrigins(Vec::new()))
        .await
        .unwrap();
    assert!(after.frame_origins.is_empty());
    assert_eq!(
        store.partner(&record.name).await.unwrap(),
        Some(after.clone())
    );
    assert_eq!(
        store
            .partner_by_key(&after.key_sha256)
            .await
            .unwrap()
            .map(|p| p.frame_origins),
        Some(Vec::new())
    );
    assert!(matches!(
        store
            .update_partner(
                &PartnerName::parse("nobody").unwrap(),
                PartnerChange::WebhookSecret("x".into())
            )
            .await,
        Err(StoreError::NotFound(_))
    ));
}

/// A website of `user` answering for `domain` and the `subdomains` given.
fn website_with(domain: &str, user: &User, subdomains: &[&str]) -> Website {
    let mut site = website(domain, user);
    site.apply(WebsiteInput {
        subdomain: Some(subdomains.iter().map(|s| s.to_string()).collect()),
        ..WebsiteInput::default()
    })
    .unwrap();
    site
}

#[track_caller]
fn assert_host_taken<T: std::fmt::Debug>(
    result: Result<T, StoreError>,
    field: HostField,
    host: &str,
    clash: HostClash,
) {
    match result {
        Err(StoreError::HostTaken {
            field: f,
            host: h,
            clash: c,
        }) if f == field && h == host && c == clash => {}
        other => panic!("expected {field} {host} {clash:?}, got {other:?}"),
    }
}

/// Every host name belongs to one website of all partners, and no partner's domain
/// lies under or above another's; checked atomically on create and update.
async fn host_names<S: Store>(store: &S) {
    use HostClash::{Above, Taken, Under};
    use HostField::{Domain as D, Subdomain as S};
    let (victims, alice) = partner_and_user(store, "victims", "alice").await;
    let (rivals, mallory) = partner_and_user(store, "rivals-inc", "mallory").await;
    let carol = user(&victims, "carol");
    store.create_user(&carol).await.unwrap();
    let create = |partner: &PartnerRecord, site: Website| {
        let name = partner.name.clone();
        async move { store.create_website(&name, &site).await }
    };

    create(&victims, website_with("victim.example", &alice, &["www"]))
        .await
        .unwrap();
    // Another partner can claim neither a host name nor anything under the domain.
    assert_host_taken(
        create(&rivals, website("www.victim.example", &mallory)).await,
        D,
        "www.victim.example",
        Taken,
    );
    assert_host_taken(
        create(&rivals, website("deep.victim.example", &mallory)).await,
        D,
        "deep.victim.example",
        Under,
    );
    // Nor a domain above a victim's, nor a subdomain that is a victim's domain.
    create(&victims, website("shop.victim2.example", &alice))
        .await
        .unwrap();
    assert_host_taken(
        create(
            &rivals,
            website_with("victim2.example", &mallory, &["shop"]),
        )
        .await,
        S,
        "shop.victim2.example",
        Taken,
    );
    assert_host_taken(
        create(&rivals, website("victim2.example", &mallory)).await,
        D,
        "victim2.example",
        Above,
    );
    // The partner itself may nest its own websites, one host name each.
    create(&victims, website("blog.victim.example", &carol))
        .await
        .unwrap();
    assert_host_taken(
        create(&victims, website("www.victim.example", &carol)).await,
        D,
        "www.victim.example",
        Taken,
    );
    // An update that adds a held host name is refused and changes nothing.
    let held = store
        .website(&domain("victim.example"))
        .await
        .unwrap()
        .unwrap();
    let mut grown = held.website.clone();
    grown
        .apply(WebsiteInput {
            subdomain: Some(vec!["www".into(), "blog".into()]),
            ..WebsiteInput::default()
        })
        .unwrap();
    assert_host_taken(
        store.update_website(&grown, held.revision).await,
        S,
        "blog.victim.example",
        Taken,
    );
    assert_eq!(
        store.website(&domain("victim.example")).await.unwrap(),
        Some(held.clone())
    );
    // Deleting a website removes only its own names.
    store
        .delete_website(&domain("blog.victim.example"), None)
        .await
        .unwrap();
    assert_host_taken(
        create(&victims, website("www.victim.example", &carol)).await,
        D,
        "www.victim.example",
        Taken,
    );
    // Giving a name up frees it, for the owner's partner only.
    let mut shrunk = held.website.clone();
    shrunk
        .apply(WebsiteInput {
            subdomain: Some(vec![]),
            ..WebsiteInput::default()
        })
        .unwrap();
    let shrunk = store.update_website(&shrunk, held.revision).await.unwrap();
    assert_host_taken(
        create(&rivals, website("www.victim.example", &mallory)).await,
        D,
        "www.victim.example",
        Under,
    );
    create(&victims, website("www.victim.example", &carol))
        .await
        .unwrap();
    let mut regrown = shrunk.website.clone();
    regrown
        .apply(WebsiteInput {
            subdomain: Some(vec!["www".into()]),
            ..WebsiteInput::default()
        })
        .unwrap();
    assert_host_taken(
        store.update_website(&regrown, shrunk.revision).await,
        S,
        "www.victim.example",
        Taken,
    );
    // Deleting a user gives up its websites' names.
    store.delete_user(&victims.name, &carol.id).await.unwrap();
    create(&victims, website("www.victim.example", &alice))
        .await
        .unwrap();

    // Of two concurrent claims of one host name, exactly one wins: across partners
    // and within one.
    for (i, (first, second)) in [(&victims, &rivals), (&victims, &victims)]
        .into_iter()
        .enumerate()
    {
        let owner = |p: &PartnerRecord| {
            if p.name == victims.name {
                &alice
            } else {
                &mallory
            }
        };
        let apex = format!("race{i}.example");
        let (a, b) = tokio::join!(
            create(first, website_with(&apex, owner(first), &["www"])),
            create(second, website(&format!("www.{apex}"), owner(second))),
        );
        assert_eq!(
            usize::from(a.is_ok()) + usize::from(b.is_ok()),
            1,
            "exactly one of two concurrent claims wins: {a:?} / {b:?}"
        );
    }
}

async fn ephemeral_values_and_leases<S: Store>(store: &S) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let version = store.version().await.unwrap();
    assert_eq!(store.ephemeral("acme:token", now).await.unwrap(), None);
    store
        .put_ephemeral("acme:token", "token.thumbprint", now + 60_000)
        .await
        .unwrap();
    assert_eq!(
        store.ephemeral("acme:token", now).await.unwrap().as_deref(),
        Some("token.thumbprint")
    );
    store.remove_ephemeral("acme:token").await.unwrap();
    assert_eq!(store.ephemeral("acme:token", now).await.unwrap(), None);
    // A value past its time is gone.
    store.put_ephemeral("brief", "x", now + 30).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(80)).await;
    let later = now + 80;
    assert_eq!(
        store.ephemeral("brief", later.max(now + 31)).await.unwrap(),
        None
    );

    assert!(
        store
            .lease("issue:a.example", "gw-1", now, now + 60_000)
            .await
            .unwrap()
    );
    assert!(
        !store
            .lease("issue:a.example", "gw-2", now, now + 60_000)
            .await
            .unwrap(),
        "a held lease is refused to another holder"
    );
    assert!(
        store
            .lease("issue:a.example", "gw-1", now, now + 90_000)
            .await
            .unwrap(),
        "its holder extends it"
    );
    assert!(
        store
            .lease("issue:b.example", "gw-2", now, now + 60_000)
            .await
            .unwrap()
    );
    // An expired lease is free again.
    assert!(
        store
            .lease("issue:c.example", "gw-1", now, now + 30)
            .await
            .unwrap()
    );
    tokio::time::sleep(std::time::Duration::from_millis(80)).await;
    assert!(
        store
            .lease("issue:c.example", "gw-2", now + 80, now + 60_000)
            .await
            .unwrap(),
        "an expired lease goes to whoever asks"
    );
    store.remove_ephemeral("issue:a.example").await.unwrap();
    assert!(
        store
            .lease("issue:a.example", "gw-2", now, now + 60_000)
            .await
            .unwrap()
    );
    assert_eq!(
        store.version().await.unwrap(),
        version,
        "not website changes"
    );
}

/// A delivery of `partner` named `id`, due at `due_ms`.
pub fn delivery(partner: &str, id: &str, due_ms: u64) -> Delivery {
    Delivery {
        id: id.into(),
        partner: PartnerName::parse(partner).unwrap(),
        url: format!("http://hooks.example/{id}"),
        body: format!("{{\"domain\":\"{id}.example\"}}"),
        created_ms: due_ms,
        attempts: 0,
        next_attempt_ms: due_ms,
        last_error: None,
    }
}

/// The ids of what a claim at `now_ms` of up to `limit` deliveries, with no shares,
/// takes (leased until 60 000).
pub async fn claimed_ids<S: Store>(store: &S, now_ms: u64, limit: usize) -> Vec<String> {
    store
        .claim_deliveries(now_ms, 60_000, limit, &ClaimShares::unbounded())
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.id)
        .collect()
}

async fn outbox<S: Store>(store: &S) {
    let version = store.version().await.unwrap();
    assert_eq!(store.deliveries().await.unwrap(), vec![], "starts empty");
    for (id, due) in [("msg_b", 2_000), ("msg_a", 1_000), ("msg_c", 9_000)] {
        store
            .enqueue_delivery(&delivery("acme", id, due), 100)
            .await
            .unwrap();
    }
    assert_eq!(
        store
            .claim_deliveries(500, 60_000, 10, &ClaimShares::unbounded())
            .await
            .unwrap(),
        vec![],
        "nothing is due before its time"
    );
    let claimed = store
        .claim_deliveries(5_000, 65_000, 10, &ClaimShares::unbounded())
        .await
        .unwrap();
    let ids: Vec<&str> = claimed.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["msg_a", "msg_b"], "the due ones, oldest due first");
    assert!(
        claimed.iter().all(|d| d.next_attempt_ms == 65_000),
        "a claim carries its lease: {claimed:?}"
    );
    assert_eq!(claimed[0].body, delivery("acme", "msg_a", 0).body);
    assert_eq!(
        store
            .claim_deliveries(6_000, 66_000, 10, &ClaimShares::unbounded())
            .await
            .unwrap(),
        vec![],
        "a leased delivery is not claimed again while the lease holds"
    );
    let mut failed = claimed[1].clone();
    failed.attempts = 1;
    failed.next_attempt_ms = 7_000;
    failed.last_error = Some("503 from the receiver".into());
    store.retry_delivery(&failed).await.unwrap();
    let again = store
        .claim_deliveries(7_000, 67_000, 1, &ClaimShares::unbounded())
        .await
        .unwrap();
    assert_eq!(again.len(), 1, "limit");
    assert_eq!(again[0].id, "msg_b", "retried when due again");
    assert_eq!(again[0].attempts, 1);
    assert_eq!(
        again[0].last_error.as_deref(),
        Some("503 from the receiver")
    );
    // A lease that ran out (the gateway died mid-delivery) frees the delivery.
    let expired = store
        .claim_deliveries(65_000, 70_000, 10, &ClaimShares::unbounded())
        .await
        .unwrap();
    assert_eq!(
        expired.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
        ["msg_c", "msg_a"],
        "due ones and ones whose lease ran out, by when they were due"
    );
    store.finish_delivery("msg_a").await.unwrap();
    store.finish_delivery("msg_a").await.unwrap();
    let mut gone = delivery("acme", "msg_gone", 1);
    gone.attempts = 3;
    store.retry_delivery(&gone).await.unwrap();
    let left: Vec<String> = store
        .deliveries()
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.id)
        .collect();
    assert_eq!(
        left,
        ["msg_b", "msg_c"],
        "finished ones are gone; retrying a finished one does not bring it back"
    );
    store.finish_delivery("msg_b").await.unwrap();
    store.finish_delivery("msg_c").await.unwrap();

    // A partner's waiting webhooks are bounded, through claims and retries; another
    // partner's are not held up by them; a delivered one makes room.
    for id in ["msg_f1", "msg_f2"] {
        store
            .enqueue_delivery(&delivery("flood", id, 1), 2)
            .await
            .unwrap();
    }
    let claimed = store
        .claim_deliveries(10, 60_000, 10, &ClaimShares::unbounded())
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2);
    let mut failed = claimed[0].clone();
    failed.attempts = 1;
    store.retry_delivery(&failed).await.unwrap();
    store
        .enqueue_delivery(&delivery("flood", "msg_f1", 5), 2)
        .await
        .expect("replacing a waiting one is not one more");
    let flood = PartnerName::parse("flood").unwrap();
    assert_eq!(
        store.waiting_deliveries(&flood, 10).await.unwrap(),
        2,
        "claimed ones wait too"
    );
    assert_eq!(
        store.waiting_deliveries(&flood, 1).await.unwrap(),
        1,
        "counted up to the bound"
    );
    let refused = store
        .enqueue_delivery(&delivery("flood", "msg_f3", 1), 2)
        .await;
    assert!(
        matches!(&refused, Err(crate::StoreError::Full(what)) if what.contains("flood")),
        "{refused:?}"
    );
    store
        .enqueue_delivery(&delivery("acme", "msg_a2", 1), 2)
        .await
        .unwrap();
    store.finish_delivery("msg_f1").await.unwrap();
    assert_eq!(store.waiting_deliveries(&flood, 10).await.unwrap(), 1);
    let acme = PartnerName::parse("acme").unwrap();
    assert_eq!(
        store.waiting_deliveries(&acme, 10).await.unwrap(),
        1,
        "its own only"
    );
    store
        .enqueue_delivery(&delivery("flood", "msg_f3", 1), 2)
        .await
        .expect("room again once one was delivered");
    for id in ["msg_f2", "msg_f3", "msg_a2"] {
        store.finish_delivery(id).await.unwrap();
    }
    assert_eq!(store.deliveries().await.unwrap(), vec![]);
    assert_eq!(
        store.version().await.unwrap(),
        version,
        "the outbox is not website changes"
    );
}

/// Claims share a gateway's slots among partners: one holding its share, or with a long
/// backlog, waits behind others; what is left unclaimed is left as it was.
async fn outbox_shares<S: Store>(store: &S) {
    let ids =
        |claimed: &[Delivery]| -> Vec<String> { claimed.iter().map(|d| d.id.clone()).collect() };
    // `stalled` has a backlog due longest; `quiet` one; `other` three.
    for n in 0..40 {
        store
            .enqueue_delivery(&delivery("stalled", &format!("msg_s{n:02}"), 100 + n), 1000)
            .await
            .unwrap();
    }
    store
        .enqueue_delivery(&delivery("quiet", "msg_q0", 500), 1000)
        .await
        .unwrap();
    for n in 0..3 {
        store
            .enqueue_delivery(&delivery("other", &format!("msg_o{n}"), 400 + n), 1000)
            .await
            .unwrap();
    }
    let name = |n: &str| PartnerName::parse(n).unwrap();
    let shares = ClaimShares {
        per_partner: 4,
        held: [(name("stalled"), 4)].into(),
    };
    let claimed = store
        .claim_deliveries(1_000, 60_000, 3, &shares)
        .await
        .unwrap();
    assert_eq!(
        ids(&claimed),
        ["msg_o0", "msg_o1", "msg_q0"],
        "the partners holding fewest first, oldest due first; none of one at its share"
    );
    assert!(claimed.iter().all(|d| d.next_attempt_ms == 60_000));
    // Without a share held, the slots alternate, the longest due first.
    let shares = ClaimShares {
        per_partner: 4,
        held: [(name("other"), 2), (name("quiet"), 1)].into(),
    };
    let claimed = store
        .claim_deliveries(1_000, 60_000, 4, &shares)
        .await
        .unwrap();
    assert_eq!(
        ids(&claimed),
        ["msg_s00", "msg_s01", "msg_s02", "msg_o2"],
        "`stalled` holds none now: it gets slots until it holds as many as `other`"
    );
    let claimed = store
        .claim_deliveries(1_000, 60_000, 10, &shares)
        .await
        .unwrap();
    assert_eq!(
        ids(&claimed),
        ["msg_s03", "msg_s04", "msg_s05", "msg_s06"],
        "each partner to its share: only `stalled` has deliveries due"
    );
    // What no claim took is as it was: due when it was, in the outbox.
    let left = store.deliveries().await.unwrap();
    assert_eq!(left.len(), 44);
    let waiting: Vec<(&str, u64)> = left
        .iter()
        .filter(|d| d.next_attempt_ms != 60_000)
        .map(|d| (d.id.as_str(), d.next_attempt_ms))
        .collect();
    assert_eq!(waiting.len(), 33);
    assert_eq!(waiting[0], ("msg_s07", 107));
    // Finished and retried ones keep the partners' order right.
    for delivery in &left {
        if delivery.next_attempt_ms == 60_000 {
            store.finish_delivery(&delivery.id).await.unwrap();
        }
    }
    let mut later = left.iter().find(|d| d.id == "msg_s07").unwrap().clone();
    later.next_attempt_ms = 5_000;
    store.retry_delivery(&later).await.unwrap();
    let claimed = store
        .claim_deliveries(1_000, 60_000, 1, &ClaimShares::unbounded())
        .await
        .unwrap();
    assert_eq!(
        ids(&claimed),
        ["msg_s08"],
        "a retried one is due when it says"
    );
    for delivery in store.deliveries().await.unwrap() {
        store.finish_delivery(&delivery.id).await.unwrap();
    }
    assert_eq!(
        store
            .claim_deliveries(u64::MAX / 2, u64::MAX / 2, 10, &ClaimShares::unbounded())
            .await
            .unwrap(),
        vec![]
    );
}

async fn shared_secrets<S: Store>(store: &S) {
    let version = store.version().await.unwrap();
    let first = store.shared_secret("challenge", "aaaa").await.unwrap();
    assert_eq!(first, "aaaa", "the first candidate is stored");
    let second = store.shared_secret("challenge", "bbbb").await.unwrap();
    assert_eq!(
        second, "aaaa",
        "a later candidate never replaces the stored secret"
    );
    let other = store.shared_secret("other", "cccc").await.unwrap();
    assert_eq!(other, "cccc", "secrets are kept by name");
    assert_eq!(
        store.version().await.unwrap(),
        version,
        "secrets are not website changes"
    );
}

async fn partners<S: Store>(store: &S) {
    let acme = partner("acme");
    store.put_partner(&acme).await.unwrap();
    assert_eq!(
        store.partner_by_key(&acme.key_sha256).await.unwrap(),
        Some(acme.clone())
    );
    assert_eq!(store.partner(&acme.name).await.unwrap(), Some(acme.clone()));
    assert_eq!(store.partner_by_key(&"f".repeat(64)).await.unwrap(), None);
    // A new key replaces the old one.
    let rotated = PartnerRecord {
        key_sha256: "a".repeat(64),
        ..acme.clone()
    };
    store.put_partner(&rotated).await.unwrap();
    assert_eq!(
        store.partner_by_key(&acme.key_sha256).await.unwrap(),
        None,
        "old key still works"
    );
    assert_eq!(
        store.partner_by_key(&rotated.key_sha256).await.unwrap(),
        Some(rotated.clone())
    );
    store.put_partner(&acme).await.unwrap();
    // Created only where there is none: the first creation's key stays.
    let first = partner("gamma-hosting");
    store.create_partner(&first).await.unwrap();
    let second = PartnerRecord {
        key_sha256: "b".repeat(64),
        ..first.clone()
    };
    assert!(matches!(
        store.create_partner(&second).await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(
        store.partner(&first.name).await.unwrap(),
        Some(first.clone())
    );
    assert_eq!(
        store.partner_by_key(&second.key_sha256).await.unwrap(),
        None
    );
    // The operator's list: every partner once, in name order, with its current key.
    store.put_partner(&partner("beta-hosting")).await.unwrap();
    let listed = store.partners().await.unwrap();
    let names: Vec<&str> = listed.iter().map(|p| p.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(names, sorted, "in name order, once each");
    assert!(names.contains(&"beta-hosting"), "{names:?}");
    assert!(listed.contains(&acme), "{listed:?}");
}

async fn users_and_tenants<S: Store>(store: &S) {
    let acme = partner("acme");
    let other = partner("other-hosting");
    store.put_partner(&other).await.unwrap();
    let alice = user(&acme, "alice@example.com");
    store.create_user(&alice).await.unwrap();
    assert!(
        matches!(
            store.create_user(&alice).await,
            Err(StoreError::Conflict(_))
        ),
        "duplicate user"
    );
    let ghost = user(&partner("ghost"), "x");
    assert!(
        matches!(
            store.create_user(&ghost).await,
            Err(StoreError::NotFound(_))
        ),
        "user of a missing partner"
    );

    assert_eq!(
        store.user(&acme.name, &alice.id).await.unwrap(),
        Some(alice.clone())
    );
    assert_eq!(
        store.user_by_key(&alice.api_key).await.unwrap(),
        Some(alice.clone())
    );
    assert_eq!(store.user_by_key("no-such-key").await.unwrap(), None);
    // Another partner neither sees acme's user nor is blocked from the same id.
    assert_eq!(
        store.user(&other.name, &alice.id).await.unwrap(),
        None,
        "cross-tenant read"
    );
    let other_alice = user(&other, "alice@example.com");
    store.create_user(&other_alice).await.unwrap();
    assert_eq!(
        store.user(&other.name, &alice.id).await.unwrap(),
        Some(other_alice)
    );

    // Pages in id order.
    for id in ["bob", "carol", "dave", "erin"] {
        store.create_user(&user(&acme, id)).await.unwrap();
    }
    let first = store.users(&acme.name, None, 2).await.unwrap();
    let ids = |p: &crate::Page<User>| {
        p.items
            .iter()
            .map(|u| u.id.as_str().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&first), ["alice@example.com", "bob"]);
    let second = store
        .users(&acme.name, first.next.as_deref(), 2)
        .await
        .unwrap();
    assert_eq!(ids(&second), ["carol", "dave"]);
    let third = store
        .users(&acme.name, second.next.as_deref(), 2)
        .await
        .unwrap();
    assert_eq!(ids(&third), ["erin"]);
    assert_eq!(third.next, None);
    let others = store.users(&other.name, None, 100).await.unwrap();
    assert_eq!(
        ids(&others),
        ["alice@example.com"],
        "listing leaks across partners"
    );
}

async fn websites<S: Store>(store: &S) {
    let acme = partner("acme");
    let other = partner("other-hosting");
    let alice = store
        .user(&acme.name, &UserId::parse("alice@example.com").unwrap())
        .await
        .unwrap()
        .unwrap();
    let bob = store
        .user(&acme.name, &UserId::parse("bob").unwrap())
        .await
        .unwrap()
        .unwrap();

    let shop = website("shop.example", &alice);
    let record = store.create_website(&acme.name, &shop).await.unwrap();
    assert!(record.revision >= 1);
    assert_eq!(record.partner, acme.name);
    assert!(matches!(
        store
            .create_website(&other.name, &website("shop.example", &alice))
            .await,
        Err(StoreError::Conflict(_) | StoreError::NotFound(_))
    ));
    let other_alice = store.user(&other.name, &alice.id).await.unwrap().unwrap();
    assert!(
        matches!(
            store
                .create_website(&other.name, &website("shop.example", &other_alice))
                .await,
            Err(StoreError::Conflict(_))
        ),
        "a domain is unique across partners"
    );
    let nobody = user(&acme, "nobody");
    assert!(matches!(
        store
            .create_website(&acme.name, &website("nobody.example", &nobody))
            .await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(
        store.website(&domain("shop.example")).await.unwrap(),
        Some(record.clone())
    );
    assert_eq!(store.website(&domain("none.example")).await.unwrap(), None);

    // Conditional updates.
    let mut changed = shop.clone();
    changed.tag = vec!["dc1".into()];
    let updated = store
        .update_website(&changed, record.revision)
        .await
        .unwrap();
    assert!(updated.revision > record.revision);
    assert_eq!(updated.website.tag, ["dc1"]);
    assert_eq!(updated.partner, acme.name);
    assert!(
        matches!(
            store.update_website(&shop, record.revision).await,
            Err(StoreError::Stale(_))
        ),
        "stale write accepted"
    );
    assert!(matches!(
        store
            .update_website(&website("none.example", &alice), 1)
            .await,
        Err(StoreError::NotFound(_))
    ));

    // Listings per partner and per user, in domain order, paged.
    for d in ["a.example", "b.example", "c.example"] {
        store
            .create_website(&acme.name, &website(d, &bob))
            .await
            .unwrap();
    }
    store
        .create_website(&other.name, &website("other.example", &other_alice))
        .await
        .unwrap();
    let domains = |p: &crate::Page<crate::WebsiteRecord>| {
        p.items
            .iter()
            .map(|r| r.website.domain.as_str().to_owned())
            .collect::<Vec<_>>()
    };
    let all = store.websites(&acme.name, None, None, 100).await.unwrap();
    assert_eq!(
        domains(&all),
        ["a.example", "b.example", "c.example", "shop.example"]
    );
    let first = store
        .websites(&acme.name, Some(&bob.id), None, 2)
        .await
        .unwrap();
    assert_eq!(domains(&first), ["a.example", "b.example"]);
    let rest = store
        .websites(&acme.name, Some(&bob.id), first.next.as_deref(), 2)
        .await
        .unwrap();
    assert_eq!(domains(&rest), ["c.example"]);
    assert_eq!(rest.next, None);
    let others = store.websites(&other.name, None, None, 100).await.unwrap();
    assert_eq!(
        domains(&others),
        ["other.example"],
        "listing leaks across partners"
    );

    store
        .delete_website(&domain("c.example"), None)
        .await
        .unwrap();
    assert_eq!(store.website(&domain("c.example")).await.unwrap(), None);
    assert!(matches!(
        store.delete_website(&domain("c.example"), None).await,
        Err(StoreError::NotFound(_))
    ));

    // A write read from a website that was deleted, its name since taken by another
    // partner's website (for a user of the same id), changes nothing of the new one:
    // revisions never repeat for a domain.
    let taken = store
        .create_website(&acme.name, &website("taken.example", &bob))
        .await
        .unwrap();
    let read_then = store
        .website(&domain("taken.example"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read_then, taken);
    store
        .delete_website(&domain("taken.example"), Some(taken.revision))
        .await
        .unwrap();
    let other_bob = user(&other, "bob");
    store.create_user(&other_bob).await.unwrap();
    let theirs = store
        .create_website(&other.name, &website("taken.example", &other_bob))
        .await
        .unwrap();
    let mut stale = read_then.website.clone();
    stale.tag = vec!["hijack".into()];
    assert!(
        matches!(
            store.update_website(&stale, read_then.revision).await,
            Err(StoreError::Stale(_))
        ),
        "a stale write reached the new owner's website"
    );
    assert!(
        matches!(
            store
                .delete_website(&domain("taken.example"), Some(read_then.revision))
                .await,
            Err(StoreError::Stale(_))
        ),
        "a stale deletion removed the new owner's website"
    );
    assert_eq!(
        store.website(&domain("taken.example")).await.unwrap(),
        Some(theirs)
    );
    store
        .delete_website(&domain("taken.example"), None)
        .await
        .unwrap();
    let bobs = store
        .websites(&acme.name, Some(&bob.id), None, 100)
        .await
        .unwrap();
    assert_eq!(domains(&bobs), ["a.example", "b.example"]);
}

async fn change_feed<S: Store>(store: &S) {
    let acme = partner("acme");
    let alice = store
        .user(&acme.name, &UserId::parse("alice@example.com").unwrap())
        .await
        .unwrap()
        .unwrap();
    let mut feed = store.subscribe();
    let before = store.version().await.unwrap();
    assert!(before > 0, "writes so far did not advance the version");
    let record = store
        .create_website(&acme.name, &website("feed.example", &alice))
        .await
        .unwrap();
    let mut next = record.website.clone();
    next.tag = vec!["x".into()];
    store.update_website(&next, record.revision).await.unwrap();
    store
        .delete_website(&domain("feed.example"), None)
        .await
        .unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let change = tokio::time::timeout(std::time::Duration::from_secs(5), feed.recv())
            .await
            .expect("a change within 5 s")
            .expect("no gap");
        seen.push(change);
    }
    let versions: Vec<u64> = seen.iter().map(|c| c.version).collect();
    assert_eq!(
        versions,
        [before + 1, before + 2, before + 3],
        "versions in order, one per write"
    );
    assert!(seen.iter().all(|c| c.what
        == Changed::Website {
            domain: domain("feed.example")
        }));
    assert!(matches!(feed.try_recv(), Err(TryRecvError::Empty)));
    let snapshot = store.snapshot().await.unwrap();
    assert_eq!(snapshot.version, before + 3);
    assert_eq!(store.version().await.unwrap(), before + 3);
    // The position agrees with the snapshot: the same version, in the same history.
    let position = store.position().await.unwrap();
    assert_eq!(
        (position.version, position.history.as_str()),
        (snapshot.version, snapshot.history.as_str())
    );
    let names: Vec<&str> = snapshot
        .websites
        .iter()
        .map(|r| r.website.domain.as_str())
        .collect();
    assert!(
        names.contains(&"shop.example") && !names.contains(&"feed.example"),
        "{names:?}"
    );
}

async fn deleting_a_user_deletes_its_websites<S: Store>(store: &S) {
    let acme = partner("acme");
    let bob = UserId::parse("bob").unwrap();
    let bob_key = store.user(&acme.name, &bob).await.unwrap().unwrap().api_key;
    let mut deleted = store.delete_user(&acme.name, &bob).await.unwrap();
    deleted.sort();
    assert_eq!(deleted, [domain("a.example"), domain("b.example")]);
    assert_eq!(store.user(&acme.name, &bob).await.unwrap(), None);
    assert_eq!(
        store.user_by_key(&bob_key).await.unwrap(),
        None,
        "a deleted user's key still works"
    );
    assert_eq!(store.website(&domain("a.example")).await.unwrap(), None);
    assert!(matches!(
        store.delete_user(&acme.name, &bob).await,
        Err(StoreError::NotFound(_))
    ));
    // The other partner's user of the same name is untouched.
    let other = partner("other-hosting");
    assert!(
        store
            .user(&other.name, &UserId::parse("alice@example.com").unwrap())
            .await
            .unwrap()
            .is_some()
    );
}

/// Waits (up to 10 s) until `check` holds for the follower's index.
async fn eventually(
    follower: &crate::Follower,
    what: &str,
    check: impl Fn(&crate::WebsiteIndex) -> bool,
) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while !check(&follower.index()) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the follower never saw: {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A [`crate::Follower`] over `store` (empty) sees creates, updates and deletes of
/// websites, by domain and by subdomain host name.
pub async fn follow<S: Store>(store: std::sync::Arc<S>) {
    let follower = crate::Follower::start(store.clone(), std::time::Duration::from_millis(200))
        .await
        .unwrap();
    assert!(follower.index().is_empty());
    let (acme, alice) = partner_and_user(store.as_ref(), "acme", "alice").await;
    let mut site = website("follow.example", &alice);
    site.apply(WebsiteInput {
        subdomain: Some(vec!["www".into()]),
        ..WebsiteInput::default()
    })
    .unwrap();
    let created = store.create_website(&acme.name, &site).await.unwrap();
    eventually(&follower, "a created website", |index| {
        index.by_host("www.follow.example").is_some() && index.website("follow.example").is_some()
    })
    .await;

    site.apply(WebsiteInput {
        subdomain: Some(vec!["shop".into()]),
        ..WebsiteInput::default()
    })
    .unwrap();
    store.update_website(&site, created.revision).await.unwrap();
    eventually(&follower, "an updated subdomain list", |index| {
        index.by_host("shop.follow.example").is_some()
            && index.by_host("www.follow.example").is_none()
    })
    .await;

    store.delete_user(&acme.name, &alice.id).await.unwrap();
    let version = store.version().await.unwrap();
    eventually(&follower, "a deleted user's website gone", |index| {
        index.is_empty() && index.version == version
    })
    .await;
}

/// A snapshot taken after the record of `unreadable` was made unreadable (by a backend's
/// own means): every website in `read` was read, and `unreadable` is named beside them
/// with a reason that contains `reason_names` (the record's key).
pub fn assert_left_out(
    snapshot: &crate::Snapshot,
    read: &[&str],
    unreadable: &str,
    reason_names: &str,
) {
    let domains: Vec<&str> = snapshot
        .websites
        .iter()
        .map(|r| r.website.domain.as_str())
        .collect();
    assert_eq!(domains, read);
    assert_eq!(snapshot.unreadable.len(), 1, "{:?}", snapshot.unreadable);
    assert_eq!(snapshot.unreadable[0].domain, unreadable);
    assert!(
        snapshot.unreadable[0].reason.contains(reason_names),
        "{:?}",
        snapshot.unreadable
    );
}

/// The partner's listing, read one website a page, holds the websites of `read` only
/// (the unreadable record left out, the pages after it still reached), a read of the
/// unreadable website alone is [`crate::StoreError::Corrupt`], and its owner, read
/// leniently, is the partner's `user`.
pub async fn assert_listing_leaves_out<S: Store>(
    store: &S,
    partner: &PartnerName,
    user: &str,
    read: &[&str],
    unreadable: &str,
) {
    let mut listed = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .websites(partner, None, after.as_deref(), 1)
            .await
            .expect("a listing with an unreadable record in it");
        listed.extend(page.items.into_iter().map(|r| r.website.domain.to_string()));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(listed, read);
    let alone = store.website(&domain(unreadable)).await;
    assert!(
        matches!(alone, Err(crate::StoreError::Corrupt { .. })),
        "{alone:?}"
    );
    let owner = store.website_owner(&domain(unreadable)).await.unwrap();
    assert_eq!(
        owner,
        Some(crate::WebsiteOwner {
            partner: partner.clone(),
            user: UserId::parse(user).unwrap(),
        }),
        "{unreadable}"
    );
    assert_eq!(
        store
            .website_owner(&domain("never-created.example"))
            .await
            .unwrap(),
        None
    );
}
