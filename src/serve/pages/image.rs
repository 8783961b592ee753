//! `/s/<id>/image`: an image of a session, its payload decoded from the
//! index or read from the agent's store when the session keeps it outside
//! its file (`crate::outside`).

use crate::query::tree;
use crate::serve::api::Failure;
use crate::serve::http::Answer;
use crate::serve::local::Local;
use crate::serve::params::Params;

/// `/s/<id>/image?e=ROWID&p=PATH&m=MIME`: an image payload, decoded.
pub fn image(local: &mut Local, id: &str, params: &Params) -> Result<Answer, Failure> {
    if let Some(hex) = params.get("b") {
        return outside_image(local, id, hex, params);
    }
    let rowid: i64 = params
        .get("e")
        .and_then(|e| e.parse().ok())
        .ok_or_else(|| Failure::new(400, "e=ENTRY_ROWID is missing"))?;
    let path = params.get("p").unwrap_or("");
    let index = local.index()?;
    let images = index.stored_images(rowid)?;
    let Some(image) = images.into_iter().find(|i| i.json_path == path) else {
        return Err(Failure::new(404, "no image there"));
    };
    let bytes = if image.encoding == "base64" {
        image.data
    } else {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .decode(&image.data)
            .unwrap_or(image.data)
    };
    let mut answer = Answer::new(200, image_type(params), bytes);
    answer.cache = "max-age=3600";
    Ok(answer)
}

/// Only raster types are shown inline: an SVG could carry script.
fn image_type(params: &Params) -> &'static str {
    match params.get("m") {
        Some("image/png") => "image/png",
        Some("image/jpeg") => "image/jpeg",
        Some("image/gif") => "image/gif",
        Some("image/webp") => "image/webp",
        _ => "application/octet-stream",
    }
}

/// `GET /s/<id>/image?b=<sha256>&m=<type>`: an image the session keeps
/// outside its file (omp's blob store, the port's `.blobs/`), read from
/// there now (`crate::outside`). Only a digest the session's entries name
/// is served; a missing blob is a 404 that says so.
fn outside_image(
    local: &mut Local,
    id: &str,
    hex: &str,
    params: &Params,
) -> Result<Answer, Failure> {
    let index = local.index()?;
    let session = tree::resolve(index, id)?;
    let named = index.entries_mention(session.file_id, hex)?;
    // Either agent's store: the digest alone does not say whose it is.
    let references: Vec<crate::outside::BlobRef> = [
        serde_json::json!({ "data": format!("blob:sha256:{hex}") }),
        serde_json::json!({ "data": { "$piBlob": format!("sha256:{hex}") } }),
    ]
    .iter()
    .filter_map(crate::outside::blob_ref)
    .collect();
    if !named || references.is_empty() {
        return Err(Failure::new(404, "no such image in this session"));
    }
    let file = std::path::Path::new(&session.path);
    let Some(bytes) = references
        .iter()
        .find_map(|reference| crate::outside::read(file, reference))
    else {
        return Err(Failure::new(
            404,
            "the image's blob is missing from its agent's store",
        ));
    };
    let mut answer = Answer::new(200, image_type(params), bytes);
    answer.cache = "max-age=3600";
    Ok(answer)
}
