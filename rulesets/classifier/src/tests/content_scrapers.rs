//! Content scrapers: AI, SEO, archive and research crawlers, unlisted self-declared
//! crawlers and crawl patterns.

use super::fixtures::*;
use botgate_ruleset_sdk::{Request, Ruleset};

#[test]
fn gptbot_is_an_ai_crawler() {
    assert_opinion(
        bot(
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)",
        ),
        ContentScrapers,
        "classifier.ai-crawler",
    );
}

#[test]
fn claudebot_is_an_ai_crawler() {
    assert_opinion(
        bot(
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; +claudebot@anthropic.com)",
        ),
        ContentScrapers,
        "classifier.ai-crawler",
    );
}

#[test]
fn ccbot_is_an_ai_crawler() {
    assert_opinion(
        bot("CCBot/2.0 (https://commoncrawl.org/faq/)"),
        ContentScrapers,
        "classifier.ai-crawler",
    );
}

#[test]
fn bytespider_is_an_ai_crawler() {
    assert_opinion(
        bot(
            "Mozilla/5.0 (Linux; Android 5.0) AppleWebKit/537.36 (KHTML, like Gecko) Mobile Safari/537.36 (compatible; Bytespider; spider-feedback@bytedance.com)",
        ),
        ContentScrapers,
        "classifier.ai-crawler",
    );
}

#[test]
fn unverified_perplexitybot_is_an_ai_crawler_not_an_impostor() {
    assert_opinion(
        crawler(
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; PerplexityBot/1.0; +https://perplexity.ai/perplexitybot)",
            CrawlerVerification::NoClaim,
        ),
        ContentScrapers,
        "classifier.ai-crawler",
    );
}

#[test]
fn ahrefsbot_is_an_seo_crawler() {
    assert_opinion(
        bot("Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)"),
        ContentScrapers,
        "classifier.seo-crawler",
    );
}

#[test]
fn semrushbot_is_an_seo_crawler() {
    assert_opinion(
        bot("Mozilla/5.0 (compatible; SemrushBot/7~bl; +http://www.semrush.com/bot.html)"),
        ContentScrapers,
        "classifier.seo-crawler",
    );
}

#[test]
fn mj12bot_is_an_seo_crawler() {
    assert_opinion(
        bot("Mozilla/5.0 (compatible; MJ12bot/v1.4.8; http://mj12bot.com/)"),
        ContentScrapers,
        "classifier.seo-crawler",
    );
}

#[test]
fn dotbot_is_an_seo_crawler() {
    assert_opinion(
        bot(
            "Mozilla/5.0 (compatible; DotBot/1.2; +https://opensiteexplorer.org/dotbot; help@moz.com)",
        ),
        ContentScrapers,
        "classifier.seo-crawler",
    );
}

#[test]
fn internet_archive_is_an_archiver() {
    assert_opinion(
        bot(
            "Mozilla/5.0 (compatible; archive.org_bot +http://archive.org/details/archive.org_bot)",
        ),
        ContentScrapers,
        "classifier.archiver",
    );
}

#[test]
fn semantic_scholar_is_an_academic_crawler() {
    assert_opinion(
        bot(
            "Mozilla/5.0 (compatible; SemanticScholarBot/1.0; +https://api.semanticscholar.org/crawler)",
        ),
        ContentScrapers,
        "classifier.academic-crawler",
    );
}

#[test]
fn unlisted_self_declared_bot_is_a_crawler() {
    assert_opinion(
        bot("Mozilla/5.0 (compatible; AcmeInsightsBot/3.1; +https://acme.example/bot)"),
        ContentScrapers,
        "classifier.unlisted-crawler",
    );
}

#[test]
fn browser_fetching_hundreds_of_distinct_pages_is_a_crawl_pattern() {
    assert_opinion(
        chrome("/products/item-4711").behaviour(170, 160, 0),
        ContentScrapers,
        "classifier.crawl-pattern",
    );
}

#[test]
fn crawl_pattern_is_scaled_to_the_window() {
    // 60 distinct pages in a 20-second window is 180 a minute.
    let mut facts = chrome("/products/item-4711").behaviour(62, 60, 0).build();
    facts.behaviour.window_seconds = 20;
    let opinion = Classifier::evaluate(&Request::new(&facts)).expect("an opinion");
    assert_eq!(opinion.category, ContentScrapers);
    assert_eq!(opinion.reason, "classifier.crawl-pattern");
}

#[test]
fn crawl_pattern_is_not_softened_by_a_valid_pass() {
    assert_opinion(
        chrome("/products/item-4711")
            .behaviour(170, 160, 0)
            .challenge(ChallengePass::Valid),
        ContentScrapers,
        "classifier.crawl-pattern",
    );
}
