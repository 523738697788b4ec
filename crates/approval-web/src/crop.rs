//! The crop of a snapshot's picture around its target: what a person on a
//! phone sees first, at the picture's own scale.

use countersign_approval_core::{TARGET_BOX_PNG_KEYWORD, TargetBox};
use image::{ImageFormat, RgbImage, imageops};

/// The smallest crop, in the picture's pixels: wide enough for the
/// target's surroundings (a label beside it, the heading above) on a
/// phone's width.
const MIN_CROP: (u32, u32) = (360, 220);
/// Room kept around the target on every side, beyond its outline.
const MARGIN: u32 = 48;

/// Where the backend recorded the target in `png`, from the picture's
/// [`TARGET_BOX_PNG_KEYWORD`] text chunk; `None` when it recorded none or
/// `png` is not a PNG.
pub(crate) fn recorded_target(png: &[u8]) -> Option<TargetBox> {
    let reader = png::Decoder::new(std::io::Cursor::new(png))
        .read_info()
        .ok()?;
    reader
        .info()
        .uncompressed_latin1_text
        .iter()
        .find(|chunk| chunk.keyword == TARGET_BOX_PNG_KEYWORD)
        .and_then(|chunk| TargetBox::parse(&chunk.text))
}

/// The region of a `width`×`height` picture shown around `target`: the
/// target and its margin, at least [`MIN_CROP`] (centred on the target),
/// inside the picture.
fn region(target: TargetBox, width: u32, height: u32) -> Option<TargetBox> {
    let span = |start: u32, size: u32, min: u32, limit: u32| -> (u32, u32) {
        let wanted = size.saturating_add(2 * MARGIN).max(min).min(limit);
        let centre = u64::from(start) + u64::from(size) / 2;
        let from = centre
            .saturating_sub(u64::from(wanted) / 2)
            .min(u64::from(limit - wanted));
        (from as u32, wanted)
    };
    if width == 0 || height == 0 || target.left >= width || target.top >= height {
        return None;
    }
    let (left, w) = span(target.left, target.width, MIN_CROP.0, width);
    let (top, h) = span(target.top, target.height, MIN_CROP.1, height);
    Some(TargetBox {
        left,
        top,
        width: w,
        height: h,
    })
}

/// The picture cropped around its recorded target, as a PNG; `None` when
/// it records no target or cannot be read.
pub(crate) fn target_crop(png: &[u8]) -> Option<Vec<u8>> {
    let target = recorded_target(png)?;
    let picture: RgbImage = image::load_from_memory_with_format(png, ImageFormat::Png)
        .ok()?
        .to_rgb8();
    let area = region(target, picture.width(), picture.height())?;
    let cropped =
        imageops::crop_imm(&picture, area.left, area.top, area.width, area.height).to_image();
    let mut encoded = std::io::Cursor::new(Vec::new());
    cropped.write_to(&mut encoded, ImageFormat::Png).ok()?;
    Some(encoded.into_inner())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn boxed(left: u32, top: u32, width: u32, height: u32) -> TargetBox {
        TargetBox {
            left,
            top,
            width,
            height,
        }
    }

    #[test]
    fn the_region_centres_the_target_with_a_margin_inside_the_picture() {
        // A small button in the middle of a laptop viewport.
        assert_eq!(
            region(boxed(600, 400, 80, 30), 1280, 800),
            Some(boxed(460, 305, 360, 220))
        );
        // A wide target keeps its margin.
        assert_eq!(
            region(boxed(100, 100, 500, 40), 1280, 800),
            Some(boxed(52, 10, 596, 220))
        );
        // Near the top-left corner: pushed inside.
        assert_eq!(
            region(boxed(2, 3, 40, 20), 1280, 800),
            Some(boxed(0, 0, 360, 220))
        );
        // Near the bottom-right corner: pushed inside.
        assert_eq!(
            region(boxed(1260, 790, 20, 10), 1280, 800),
            Some(boxed(920, 580, 360, 220))
        );
        // A picture smaller than the least crop: all of it.
        assert_eq!(
            region(boxed(10, 10, 20, 20), 200, 100),
            Some(boxed(0, 0, 200, 100))
        );
        // A target outside the picture: nothing.
        assert_eq!(region(boxed(300, 10, 20, 20), 200, 100), None);
    }

    #[test]
    fn a_picture_without_a_recorded_target_has_no_crop() {
        let mut png = std::io::Cursor::new(Vec::new());
        RgbImage::new(50, 40)
            .write_to(&mut png, ImageFormat::Png)
            .unwrap();
        assert_eq!(recorded_target(png.get_ref()), None);
        assert_eq!(target_crop(png.get_ref()), None);
        assert_eq!(target_crop(b"not a png"), None);
    }

    #[test]
    fn a_recorded_target_is_cropped_around() {
        let picture = RgbImage::from_fn(800, 600, |x, y| {
            image::Rgb([(x % 256) as u8, (y % 256) as u8, 7])
        });
        let mut png = Vec::new();
        {
            let mut encoder = png::Encoder::new(&mut png, 800, 600);
            encoder.set_color(png::ColorType::Rgb);
            encoder.set_depth(png::BitDepth::Eight);
            encoder
                .add_text_chunk(
                    TARGET_BOX_PNG_KEYWORD.to_owned(),
                    "500 300 60 20".to_owned(),
                )
                .unwrap();
            let mut writer = encoder.write_header().unwrap();
            writer.write_image_data(picture.as_raw()).unwrap();
            writer.finish().unwrap();
        }
        assert_eq!(recorded_target(&png), Some(boxed(500, 300, 60, 20)));
        let crop = image::load_from_memory(&target_crop(&png).unwrap())
            .unwrap()
            .to_rgb8();
        assert_eq!(crop.dimensions(), (360, 220));
        // Its top-left pixel is the picture's at the region's corner.
        assert_eq!(crop.get_pixel(0, 0), picture.get_pixel(350, 200));
    }
}
