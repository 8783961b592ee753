//! The pages' stylesheet, script and icon, compiled into the binary
//! (`include_str!`): nothing is fetched from elsewhere, the app works
//! offline and needs no front-end build.

const CSS: &str = include_str!("assets/app.css");
const JS: &str = include_str!("assets/app.js");
const ICON: &str = include_str!("assets/icon.svg");

/// The asset called `name`: its content type and bytes.
pub fn get(name: &str) -> Option<(&'static str, &'static [u8])> {
    match name {
        "app.css" => Some(("text/css; charset=utf-8", CSS.as_bytes())),
        "app.js" => Some(("text/javascript; charset=utf-8", JS.as_bytes())),
        "icon.svg" => Some(("image/svg+xml", ICON.as_bytes())),
        _ => None,
    }
}
