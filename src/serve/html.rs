//! HTML building blocks: escaping (every text from a session goes through
//! `esc`: it is untrusted, a message may hold `<script>`), the page frame,
//! and small helpers the pages share.

use std::fmt::Write;

use crate::query::search::{MARK_CLOSE, MARK_OPEN};

/// Text safe inside an element or a quoted attribute.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    push_esc(&mut out, text);
    out
}

/// Appends `text` escaped; control characters other than newline and tab
/// are shown as `^X`, as the terminal renderer shows them.
pub fn push_esc(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => push_shown(out, c),
        }
    }
}

/// Appends `c`, a control character other than newline and tab as `^X`.
fn push_shown(out: &mut String, c: char) {
    match c {
        '\n' | '\t' => out.push(c),
        c if (c as u32) < 0x20 => {
            out.push('^');
            out.push((c as u8 + b'@') as char);
        }
        '\u{7f}' => out.push_str("^?"),
        c => out.push(c),
    }
}

/// An assistant's Markdown as HTML, with nothing from the session able to
/// act: raw HTML in it is shown as text (escaped), a link keeps only an
/// http(s), mailto or relative target, and an image becomes a link to it
/// (the pages load no image from elsewhere). Control characters are shown
/// as `push_esc` shows them.
pub fn markdown(text: &str) -> String {
    use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd};
    let safe_url = |url: &str| {
        let lower = url.trim().to_ascii_lowercase();
        let scheme = lower.split_once(':').map(|(scheme, _)| scheme);
        match scheme {
            None => true,
            Some(scheme) if scheme.contains(['/', '?', '#']) => true,
            Some(scheme) => matches!(scheme, "http" | "https" | "mailto"),
        }
    };
    // pulldown-cmark escapes the markup; control characters are shown.
    let shown = |text: &str| -> String {
        let mut out = String::with_capacity(text.len());
        text.chars().for_each(|c| push_shown(&mut out, c));
        out
    };
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let events = Parser::new_ext(text, options).map(|event| match event {
        Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(CowStr::from(shown(&raw))),
        Event::Text(text) => Event::Text(CowStr::from(shown(&text))),
        Event::Code(code) => Event::Code(CowStr::from(shown(&code))),
        Event::Start(Tag::Link {
            link_type,
            dest_url,
            title,
            id,
        })
        | Event::Start(Tag::Image {
            link_type,
            dest_url,
            title,
            id,
        }) => Event::Start(Tag::Link {
            link_type,
            dest_url: if safe_url(&dest_url) {
                dest_url
            } else {
                CowStr::from("")
            },
            title,
            id,
        }),
        Event::End(TagEnd::Image) => Event::End(TagEnd::Link),
        other => other,
    });
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    pulldown_cmark::html::push_html(&mut out, events);
    out
}

/// A search snippet: escaped, its matches in `<mark>`.
pub fn snippet(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 32);
    let mut open = false;
    let mut plain = String::new();
    for c in text.chars() {
        if c == MARK_OPEN || c == MARK_CLOSE {
            push_esc(&mut out, &plain);
            plain.clear();
            if c == MARK_OPEN && !open {
                out.push_str("<mark>");
                open = true;
            } else if c == MARK_CLOSE && open {
                out.push_str("</mark>");
                open = false;
            }
        } else {
            plain.push(c);
        }
    }
    push_esc(&mut out, &plain);
    if open {
        out.push_str("</mark>");
    }
    out
}

/// `2026-02-01T10:00:00.000Z` as `2026-02-01 10:00`.
pub fn minute(timestamp: Option<&str>) -> String {
    timestamp
        .map(|t| t.replace('T', " ").chars().take(16).collect())
        .unwrap_or_default()
}

/// At most `n` characters of `text` on one line, `…` when cut.
pub fn cut(text: &str, n: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= n {
        flat
    } else {
        let mut out: String = flat.chars().take(n).collect();
        out.push('…');
        out
    }
}

/// Which page the navigation marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    Search,
    Sessions,
    Subagents,
    Usage,
    None,
}

/// The page frame: navigation, `main`, the script. `live` subscribes the
/// page to sync events (`serve --watch`).
pub fn page(title: &str, nav: Nav, live: bool, main: &str) -> String {
    let mut out = String::with_capacity(main.len() + 2048);
    out.push_str("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
    let _ = write!(out, "<title>{} · piidx</title>", esc(title));
    out.push_str("<link rel=\"stylesheet\" href=\"/assets/app.css\">");
    out.push_str("<link rel=\"icon\" href=\"/assets/icon.svg\" type=\"image/svg+xml\">");
    out.push_str("<script src=\"/assets/app.js\" defer></script></head>");
    let _ = write!(
        out,
        "<body data-live=\"{}\"><header class=\"top\">",
        live as u8
    );
    out.push_str("<a class=\"brand\" href=\"/\">piidx</a><nav>");
    for (which, href, label) in [
        (Nav::Search, "/search", "Search"),
        (Nav::Sessions, "/sessions", "Sessions"),
        (Nav::Subagents, "/subagents", "Subagents"),
        (Nav::Usage, "/usage", "Usage"),
    ] {
        let class = if which == nav { " class=\"on\"" } else { "" };
        let _ = write!(out, "<a href=\"{href}\"{class}>{label}</a>");
    }
    out.push_str("</nav>");
    if live {
        out.push_str(
            "<span id=\"live\" class=\"live\" title=\"updated after each sync\">live</span>",
        );
    }
    out.push_str("</header><main id=\"main\">");
    out.push_str(main);
    out.push_str("</main></body></html>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_is_rendered_and_nothing_in_it_acts() {
        let html = markdown("Run **this**:\n\n```sh\ncargo test\n```\n\n- a\n- b\n");
        assert!(html.contains("<strong>this</strong>"), "{html}");
        assert!(
            html.contains("<pre><code class=\"language-sh\">cargo test"),
            "{html}"
        );
        assert!(html.contains("<li>a</li>"), "{html}");
        let html = markdown(
            "<script>window.pwned=1</script>\n\nsee <img src=x onerror=alert(1)> [x](javascript:alert(1)) [y](JavaScript:alert(2)) ![i](http://evil/x.png) [ok](https://example.org) \u{1b}[1m",
        );
        assert!(
            !html.contains("<script") && !html.contains("<img"),
            "{html}"
        );
        assert!(
            html.contains("&lt;script&gt;") && html.contains("&lt;img"),
            "{html}"
        );
        assert!(!html.to_lowercase().contains("href=\"javascript"), "{html}");
        assert!(html.contains("href=\"https://example.org\""), "{html}");
        assert!(
            html.contains("href=\"http://evil/x.png\""),
            "an image is a link: {html}"
        );
        assert!(html.contains("^[[1m"), "{html}");
    }

    #[test]
    fn escapes_markup() {
        assert_eq!(
            esc("<script>alert('x')</script>&\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;"
        );
        assert_eq!(esc("a\u{1b}[1m"), "a^[[1m");
        let marked = format!("a {MARK_OPEN}<b>{MARK_CLOSE} c");
        assert_eq!(snippet(&marked), "a <mark>&lt;b&gt;</mark> c");
    }
}
