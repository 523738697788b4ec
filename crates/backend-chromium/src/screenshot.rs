//! The snapshot's picture: Chromium's viewport PNG with the target outlined,
//! kept within the size a proposal accepts.
//!
//! The outline is drawn here, on the decoded pixels, rather than as an
//! overlay in the page: an overlay is a DOM change the page could observe
//! (a mutation observer, a style query) and react to.

use countersign_approval_core::{MAX_SCREENSHOT_BYTES, TARGET_BOX_PNG_KEYWORD, TargetBox};
use image::imageops::{self, FilterType};
use image::{ImageFormat, Rgb, RgbImage};

/// The colour of the outline around a snapshot's target, as RGB: magenta,
/// which few pages use, so it stands out on most.
pub const OUTLINE_COLOUR: [u8; 3] = [255, 0, 255];

/// The width of the outline around a snapshot's target, in pixels of the
/// screenshot as delivered (after any scaling down).
pub const OUTLINE_WIDTH: u32 = 3;

const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

/// How many times a picture over the limit is shrunk before it is dropped.
const MAX_SHRINKS: usize = 8;

/// A box in pixels of the captured screenshot; it may reach past the
/// picture's edges.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PixelBox {
    pub(crate) left: f64,
    pub(crate) top: f64,
    pub(crate) right: f64,
    pub(crate) bottom: f64,
}

impl PixelBox {
    /// The part of this box inside a `w`×`h` picture, in whole pixels;
    /// `None` when none of it is.
    fn inside(self, w: u32, h: u32) -> Option<TargetBox> {
        let finite = [self.left, self.top, self.right, self.bottom]
            .iter()
            .all(|v| v.is_finite());
        if !finite {
            return None;
        }
        let left = self.left.floor().clamp(0.0, f64::from(w)) as u32;
        let top = self.top.floor().clamp(0.0, f64::from(h)) as u32;
        let right = self.right.ceil().clamp(0.0, f64::from(w)) as u32;
        let bottom = self.bottom.ceil().clamp(0.0, f64::from(h)) as u32;
        (right > left && bottom > top).then_some(TargetBox {
            left,
            top,
            width: right - left,
            height: bottom - top,
        })
    }

    fn scaled(self, x: f64, y: f64) -> PixelBox {
        PixelBox {
            left: self.left * x,
            top: self.top * y,
            right: self.right * x,
            bottom: self.bottom * y,
        }
    }
}

/// The picture a snapshot carries: `png` as Chromium captured it, with
/// `outline` drawn when there is one, scaled down until it fits
/// [`MAX_SCREENSHOT_BYTES`]. `None` when `png` cannot be read or no size
/// fits.
pub(crate) fn finish(png: Vec<u8>, outline: Option<PixelBox>) -> Option<Vec<u8>> {
    if outline.is_none() && png.len() <= MAX_SCREENSHOT_BYTES && png.starts_with(PNG_SIGNATURE) {
        // Nothing to draw and small enough: Chromium's bytes as they are,
        // which spares a decode and an encode.
        return Some(png);
    }
    let captured = match image::load_from_memory_with_format(&png, ImageFormat::Png) {
        // A screenshot is opaque: RGB encodes smaller than RGBA.
        Ok(decoded) => decoded.to_rgb8(),
        Err(error) => {
            tracing::warn!(%error, "chromium's screenshot could not be decoded; the snapshot has none");
            return None;
        }
    };
    fit(&captured, outline, MAX_SCREENSHOT_BYTES)
}

/// `captured` outlined and encoded as a PNG of at most `limit` bytes,
/// shrinking it (keeping its aspect ratio) while it is larger. The outline
/// is drawn after shrinking, so it keeps its full width and colour.
fn fit(captured: &RgbImage, outline: Option<PixelBox>, limit: usize) -> Option<Vec<u8>> {
    let (width, height) = captured.dimensions();
    let mut scale = 1.0_f64;
    for _ in 0..=MAX_SHRINKS {
        let w = ((f64::from(width) * scale).round() as u32).max(1);
        let h = ((f64::from(height) * scale).round() as u32).max(1);
        let mut picture = if (w, h) == (width, height) {
            captured.clone()
        } else {
            imageops::resize(captured, w, h, FilterType::Triangle)
        };
        let mut target = None;
        if let Some(outline) = outline {
            let x = f64::from(w) / f64::from(width.max(1));
            let y = f64::from(h) / f64::from(height.max(1));
            let scaled = outline.scaled(x, y);
            draw_outline(&mut picture, scaled);
            target = scaled.inside(w, h);
        }
        let encoded = encode(&picture, target)?;
        if encoded.len() <= limit {
            return Some(encoded);
        }
        if w == 1 && h == 1 {
            break;
        }
        // A PNG's size grows roughly with its pixel count: aim a little
        // under the limit, shrinking by at least a tenth each time.
        let ratio = limit as f64 / encoded.len() as f64;
        scale *= (ratio.sqrt() * 0.95).clamp(0.25, 0.9);
    }
    tracing::warn!(
        limit,
        "the screenshot does not fit the size limit; the snapshot has none"
    );
    None
}

/// `picture` as a PNG; with `target`, a [`TARGET_BOX_PNG_KEYWORD`] text
/// chunk saying where the outlined target lies in it.
fn encode(picture: &RgbImage, target: Option<TargetBox>) -> Option<Vec<u8>> {
    let mut encoded = Vec::new();
    let written = (|| {
        let mut encoder = png::Encoder::new(&mut encoded, picture.width(), picture.height());
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        encoder.set_compression(png::Compression::Balanced);
        if let Some(target) = target {
            encoder.add_text_chunk(TARGET_BOX_PNG_KEYWORD.to_owned(), target.to_text())?;
        }
        let mut writer = encoder.write_header()?;
        writer.write_image_data(picture.as_raw())?;
        writer.finish()
    })();
    match written {
        Ok(()) => Some(encoded),
        Err(error) => {
            tracing::warn!(%error, "the screenshot could not be encoded; the snapshot has none");
            None
        }
    }
}

/// Draws an [`OUTLINE_WIDTH`] band of [`OUTLINE_COLOUR`] just outside
/// `around`, so the element itself stays as the page shows it. The band is
/// clamped to the picture: where the element reaches the viewport's edge,
/// the band runs along that edge instead (over the element). A box wholly
/// outside the picture draws nothing.
pub(crate) fn draw_outline(picture: &mut RgbImage, around: PixelBox) {
    let (w, h) = picture.dimensions();
    let PixelBox {
        left,
        top,
        right,
        bottom,
    } = around;
    let finite = [left, top, right, bottom].iter().all(|v| v.is_finite());
    if w == 0 || h == 0 || !finite || right <= left || bottom <= top {
        return;
    }
    if right <= 0.0 || bottom <= 0.0 || left >= f64::from(w) || top >= f64::from(h) {
        return;
    }
    let band = f64::from(OUTLINE_WIDTH);
    let (max_x, max_y) = (f64::from(w - 1), f64::from(h - 1));
    // Inclusive pixel bounds of the band's outer edge.
    let x0 = (left.floor() - band).clamp(0.0, max_x) as u32;
    let y0 = (top.floor() - band).clamp(0.0, max_y) as u32;
    let x1 = (right.ceil() + band - 1.0).clamp(0.0, max_x) as u32;
    let y1 = (bottom.ceil() + band - 1.0).clamp(0.0, max_y) as u32;
    let colour = Rgb(OUTLINE_COLOUR);
    for y in y0..=y1 {
        let edge_row = y < y0 + OUTLINE_WIDTH || y + OUTLINE_WIDTH > y1;
        for x in x0..=x1 {
            if edge_row || x < x0 + OUTLINE_WIDTH || x + OUTLINE_WIDTH > x1 {
                picture.put_pixel(x, y, colour);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const WHITE: Rgb<u8> = Rgb([255, 255, 255]);
    const MAGENTA: Rgb<u8> = Rgb(OUTLINE_COLOUR);

    fn encode_plain(picture: &RgbImage) -> Option<Vec<u8>> {
        encode(picture, None)
    }

    /// The text of the picture's target chunk, as written.
    fn target_chunk(png: &[u8]) -> Option<String> {
        let decoder = png::Decoder::new(std::io::Cursor::new(png));
        let reader = decoder.read_info().unwrap();
        let chunks = &reader.info().uncompressed_latin1_text;
        assert!(chunks.len() <= 1, "one target chunk at most");
        chunks
            .first()
            .map(|chunk| (chunk.keyword.clone(), chunk.text.clone()))
            .map(|(keyword, text)| {
                assert_eq!(keyword, TARGET_BOX_PNG_KEYWORD);
                text
            })
    }

    #[test]
    fn an_outlined_picture_records_where_its_target_lies() {
        let png = encode_plain(&noise(64, 48)).unwrap();
        assert_eq!(target_chunk(&png), None);
        let outlined = finish(png, Some(boxed(10.2, 12.0, 30.0, 60.0))).unwrap();
        // Whole pixels (left, top, width, height), clamped to the picture.
        assert_eq!(target_chunk(&outlined).as_deref(), Some("10 12 20 36"));
        // Scaled down, the box is scaled with the picture.
        let shrunk = fit(
            &noise(200, 100),
            Some(boxed(40.0, 20.0, 160.0, 80.0)),
            20_000,
        )
        .unwrap();
        let (w, _) = decode(&shrunk).dimensions();
        let target = TargetBox::parse(&target_chunk(&shrunk).unwrap()).unwrap();
        let expected_left = (40.0 * f64::from(w) / 200.0).floor() as u32;
        assert_eq!(target.left, expected_left);
        // A box outside the picture records nothing.
        let outside = finish(
            encode_plain(&noise(64, 48)).unwrap(),
            Some(boxed(100.0, 100.0, 120.0, 120.0)),
        )
        .unwrap();
        assert_eq!(target_chunk(&outside), None);
    }

    fn white(w: u32, h: u32) -> RgbImage {
        RgbImage::from_pixel(w, h, WHITE)
    }

    fn boxed(left: f64, top: f64, right: f64, bottom: f64) -> PixelBox {
        PixelBox {
            left,
            top,
            right,
            bottom,
        }
    }

    /// Pseudo-random pixels: a PNG of them barely compresses.
    fn noise(w: u32, h: u32) -> RgbImage {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        RgbImage::from_fn(w, h, |_, _| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let [r, g, b, ..] = state.to_le_bytes();
            Rgb([r, g, b])
        })
    }

    fn decode(png: &[u8]) -> RgbImage {
        image::load_from_memory_with_format(png, ImageFormat::Png)
            .unwrap()
            .to_rgb8()
    }

    #[test]
    fn the_band_lies_just_outside_the_box() {
        let mut picture = white(100, 80);
        draw_outline(&mut picture, boxed(20.0, 30.0, 60.0, 50.0));
        for (x, y) in [
            (17, 40),
            (19, 40),
            (60, 40),
            (62, 40),
            (40, 27),
            (40, 29),
            (40, 50),
            (40, 52),
        ] {
            assert_eq!(picture.get_pixel(x, y), &MAGENTA, "({x}, {y})");
        }
        // The element's own pixels and those past the band are untouched.
        for (x, y) in [
            (20, 40),
            (59, 40),
            (40, 30),
            (40, 49),
            (40, 40),
            (16, 40),
            (63, 40),
            (40, 26),
            (40, 53),
        ] {
            assert_eq!(picture.get_pixel(x, y), &WHITE, "({x}, {y})");
        }
    }

    #[test]
    fn a_box_past_the_edges_is_outlined_along_them() {
        let mut picture = white(100, 80);
        draw_outline(&mut picture, boxed(-40.0, 10.0, 30.0, 120.0));
        // Left and bottom edges of the picture carry the band.
        for (x, y) in [(0, 40), (2, 40), (15, 79), (15, 77), (30, 40), (32, 40)] {
            assert_eq!(picture.get_pixel(x, y), &MAGENTA, "({x}, {y})");
        }
        for (x, y) in [(3, 40), (15, 76), (29, 40), (33, 40)] {
            assert_eq!(picture.get_pixel(x, y), &WHITE, "({x}, {y})");
        }
    }

    #[test]
    fn a_box_outside_the_picture_or_empty_draws_nothing() {
        for around in [
            boxed(-50.0, 10.0, -10.0, 20.0),
            boxed(10.0, 90.0, 20.0, 120.0),
            boxed(10.0, 10.0, 10.0, 20.0),
            boxed(f64::NAN, 10.0, 20.0, 20.0),
        ] {
            let mut picture = white(100, 80);
            draw_outline(&mut picture, around);
            assert_eq!(picture, white(100, 80), "{around:?}");
        }
    }

    #[test]
    fn without_an_outline_chromiums_bytes_are_kept() {
        let png = encode_plain(&noise(40, 30)).unwrap();
        assert_eq!(finish(png.clone(), None), Some(png));
    }

    #[test]
    fn an_outlined_picture_keeps_its_size_and_other_pixels() {
        let captured = noise(64, 48);
        let png = encode_plain(&captured).unwrap();
        let outlined = decode(&finish(png, Some(boxed(10.0, 10.0, 30.0, 30.0))).unwrap());
        assert_eq!(outlined.dimensions(), (64, 48));
        assert_eq!(outlined.get_pixel(8, 20), &MAGENTA);
        assert_eq!(outlined.get_pixel(20, 20), captured.get_pixel(20, 20));
        assert_eq!(outlined.get_pixel(50, 40), captured.get_pixel(50, 40));
    }

    #[test]
    fn a_picture_over_the_limit_is_scaled_down_with_a_full_width_outline() {
        let captured = noise(200, 100);
        let limit = 20_000;
        assert!(encode_plain(&captured).unwrap().len() > limit);
        let png = fit(&captured, Some(boxed(40.0, 20.0, 160.0, 80.0)), limit).unwrap();
        assert!(png.len() <= limit, "{} bytes", png.len());
        let shrunk = decode(&png);
        let (w, h) = shrunk.dimensions();
        assert!(w < 200 && h < 100, "{w}x{h}");
        // The aspect ratio is kept, to a pixel.
        assert!((i64::from(w) - 2 * i64::from(h)).abs() <= 1, "{w}x{h}");
        // The band is still three pixels wide, just left of the scaled box.
        let left = (40.0 * f64::from(w) / 200.0).floor() as u32;
        let middle = h / 2;
        for x in left - 3..left {
            assert_eq!(shrunk.get_pixel(x, middle), &MAGENTA, "x {x} in {w}x{h}");
        }
    }

    #[test]
    fn a_large_viewport_is_brought_under_two_mebibytes() {
        // A 1024x720 viewport of noise: about 2.2 MB as a PNG.
        let png = encode_plain(&noise(1024, 720)).unwrap();
        assert!(png.len() > MAX_SCREENSHOT_BYTES);
        let fitted = finish(png, None).unwrap();
        assert!(fitted.len() <= MAX_SCREENSHOT_BYTES);
        let (w, h) = decode(&fitted).dimensions();
        assert!(
            (512..1024).contains(&w) && (360..720).contains(&h),
            "{w}x{h}"
        );
    }

    #[test]
    fn a_picture_that_cannot_fit_is_dropped() {
        assert_eq!(fit(&noise(64, 64), None, 10), None);
    }

    #[test]
    fn what_is_not_a_png_is_dropped() {
        assert_eq!(finish(b"not a png".to_vec(), None), None);
        assert_eq!(
            finish(
                b"\x89PNG\r\n\x1a\nbroken".to_vec(),
                Some(boxed(1.0, 1.0, 2.0, 2.0))
            ),
            None
        );
    }
}
