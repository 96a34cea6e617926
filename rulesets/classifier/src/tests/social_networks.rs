//! Social networks: link-preview fetchers whose claim the host verified.

use super::fixtures::*;

const VERIFIED: &str = "classifier.verified-social-network";

fn verified(ua: &str) -> RequestBuilder {
    crawler(ua, CrawlerVerification::VerifiedSocialNetwork)
}

#[test]
fn verified_facebookexternalhit() {
    assert_opinion(
        verified("facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)"),
        SocialNetworks,
        VERIFIED,
    );
}

#[test]
fn verified_twitterbot() {
    assert_opinion(verified("Twitterbot/1.0"), SocialNetworks, VERIFIED);
}

#[test]
fn verified_linkedinbot() {
    assert_opinion(
        verified(
            "LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)",
        ),
        SocialNetworks,
        VERIFIED,
    );
}

#[test]
fn verified_slackbot_link_expanding() {
    assert_opinion(
        verified("Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"),
        SocialNetworks,
        VERIFIED,
    );
}

#[test]
fn verified_discordbot() {
    assert_opinion(
        verified("Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)"),
        SocialNetworks,
        VERIFIED,
    );
}

#[test]
fn verified_telegrambot() {
    assert_opinion(
        verified("TelegramBot (like TwitterBot)"),
        SocialNetworks,
        VERIFIED,
    );
}

#[test]
fn verified_whatsapp_preview() {
    assert_opinion(verified("WhatsApp/2.23.20.0"), SocialNetworks, VERIFIED);
}

#[test]
fn verified_pinterestbot() {
    assert_opinion(
        verified("Mozilla/5.0 (compatible; Pinterestbot/1.0; +http://www.pinterest.com/bot.html)"),
        SocialNetworks,
        VERIFIED,
    );
}

#[test]
fn host_verification_is_honoured_for_an_unlisted_previewer() {
    assert_opinion(
        verified("ExampleSocial-Preview/2.0"),
        SocialNetworks,
        VERIFIED,
    );
}

#[test]
fn verified_social_network_confidence_is_95() {
    assert_eq!(confidence(verified("Twitterbot/1.0")), 95);
}
