//! The nine CMS rule sets agree: each lists its probe of every kind of request the SDK
//! names (or why its CMS has none), and for each kind every probe gets the kind's one
//! category from its rule set: an installer, an upgrade script, user enumeration, a
//! configuration backup, a site dump, a scripted login, password guessing, the CMS's
//! cron and its own clients are judged alike whatever the CMS.

use botgate_ruleset_sdk::testing::kinds::{Kind, Probe, judge_kinds};
use botgate_ruleset_sdk::{Category, Ruleset};

/// What one rule set made of its probes: the kind, the category, whether it had a probe.
type Judged = Vec<(Kind, Option<Category>, bool)>;

fn judged<R: Ruleset>(probes: Vec<(Kind, Probe)>) -> (String, Judged) {
    (R::info().name, judge_kinds::<R>(&probes))
}

fn every_rule_set() -> Vec<(String, Judged)> {
    [
        judged::<bitrix::Bitrix>(bitrix::kinds::probes()),
        judged::<cpanel::Cpanel>(cpanel::kinds::probes()),
        judged::<dokuwiki::Dokuwiki>(dokuwiki::kinds::probes()),
        judged::<drupal::Drupal>(drupal::kinds::probes()),
        judged::<joomla::Joomla>(joomla::kinds::probes()),
        judged::<nextcloud::Nextcloud>(nextcloud::kinds::probes()),
        judged::<prestashop::Prestashop>(prestashop::kinds::probes()),
        judged::<wordpress::Wordpress>(wordpress::kinds::probes()),
        judged::<xenforo::Xenforo>(xenforo::kinds::probes()),
    ]
    .into()
}

#[test]
fn equivalent_probes_of_the_nine_rule_sets_get_the_same_category() {
    let sets = every_rule_set();
    assert_eq!(sets.len(), 9);
    let mut table = String::new();
    let mut disagreements = Vec::new();
    for kind in Kind::ALL {
        let mut row = format!("{kind:?}:");
        let mut probed = 0;
        for (name, judged) in &sets {
            let listed: Vec<_> = judged.iter().filter(|(k, ..)| *k == kind).collect();
            assert_eq!(
                listed.len(),
                1,
                "{name} lists {kind:?} {} times",
                listed.len()
            );
            let (_, category, had_probe) = listed[0];
            if !had_probe {
                row.push_str(&format!(" {name}=(none)"));
                continue;
            }
            probed += 1;
            row.push_str(&format!(" {name}={category:?}"));
            if *category != kind.expected() {
                disagreements.push(format!(
                    "{name} gives {kind:?} {category:?}, the others {:?}",
                    kind.expected()
                ));
            }
        }
        // A kind most CMSs have: not a rule of one rule set.
        assert!(probed >= 6, "{kind:?} is probed in {probed} rule sets only");
        table.push_str(&row);
        table.push('\n');
    }
    println!("{table}");
    assert!(
        disagreements.is_empty(),
        "{}\n{table}",
        disagreements.join("\n")
    );
}
