//! URLs as they may be shown in errors, conditions, Events, logs and command output: without userinfo
//! (`user:password@`), query or fragment. The query goes too because some SSO front ends accept tokens there
//! (`?access_token=…`); the scheme, host, port and path are enough to tell which engine and which call failed.

use reqwest::Url;

/// `url` (as a user wrote it; it need not parse) without userinfo, query and fragment. An `@` that does not
/// belong to the authority (a password with an unescaped `/`, `?` or `#` makes the URL unparsable anyway) is
/// treated as the end of userinfo all the same: whatever comes before the last `@` is dropped, so no part of a
/// password can be shown even for such URLs.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(at) => url.split_at(at + 3),
        None => ("", url),
    };
    let rest = rest.rsplit_once('@').map_or(rest, |(_, after)| after);
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    format!("{scheme}{rest}")
}

/// `url` carries userinfo (`user@` or `user:password@` in its authority), as the OVirtProvider CRD's rule on
/// spec.engine reads it: an `@` between `://` and the first `/`, `?` or `#`.
pub fn has_userinfo(url: &str) -> bool {
    let rest = url.find("://").map_or(url, |at| &url[at + 3..]);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    authority.contains('@')
}

/// Strips userinfo, query and fragment from a parsed URL (reqwest errors carry the request URL).
pub(crate) fn redact_parsed(url: &mut Url) {
    // Both only fail for URLs without a host, which have no userinfo to strip.
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_query(None);
    url.set_fragment(None);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_query_and_fragment_are_dropped() {
        assert_eq!(
            redact_url("https://admin%40internal:s3cr3t@engine.example:8443/ovirt-engine/api?access_token=t#x"),
            "https://engine.example:8443/ovirt-engine/api"
        );
        assert_eq!(redact_url("http://admin@engine/api"), "http://engine/api");
    }

    #[test]
    fn a_clean_url_is_unchanged() {
        let url = "https://engine.example/ovirt-engine/api";
        assert_eq!(redact_url(url), url);
        assert_eq!(redact_url("https://[::1]:8443/api"), "https://[::1]:8443/api");
    }

    #[test]
    fn unparsable_urls_lose_everything_before_the_last_at() {
        for url in [
            "https://admin:pa/ss@engine/api",
            "https://admin:pa?ss@engine/api",
            "https://admin:pa#ss@engine/api",
            "https://admin:p@ss@engine/api",
        ] {
            let shown = redact_url(url);
            assert_eq!(shown, "https://engine/api", "{url}");
        }
        assert_eq!(redact_url("admin:secret@engine"), "engine");
        assert_eq!(redact_url("not a url"), "not a url");
    }

    #[test]
    fn userinfo_is_an_at_in_the_authority() {
        assert!(has_userinfo("https://admin:secret@engine/ovirt-engine/api"));
        assert!(has_userinfo("https://admin@engine"));
        assert!(has_userinfo("http://:secret@engine:80/"));
        assert!(!has_userinfo("https://engine.example/ovirt-engine/api"));
        assert!(!has_userinfo("https://engine/ovirt-engine/api?search=a@b"));
        assert!(!has_userinfo("https://engine/users/admin@internal"));
    }

    #[test]
    fn parsed_urls_lose_userinfo_query_and_fragment() {
        let mut url = Url::parse("https://admin:s3cr3t@engine:8443/ovirt-engine/api/vms?search=x#f").expect("url");
        redact_parsed(&mut url);
        assert_eq!(url.as_str(), "https://engine:8443/ovirt-engine/api/vms");
    }
}
