//! Whole-stream compression of TFRecord files (none, GZIP, ZLIB), chosen explicitly or
//! detected from the file name and, failing that, from the first bytes of the file.

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;
use std::str::FromStr;

use flate2::bufread::{MultiGzDecoder, ZlibDecoder};
use flate2::write::{GzEncoder, ZlibEncoder};

use super::{HEADER_LEN, decode_header};
use crate::storage::{self, Source};

/// How a TFRecord file is compressed, as TensorFlow's `TFRecordOptions.compression_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// Detect: `.gz` is GZIP, `.zlib` is ZLIB; any other name is sniffed from its first
    /// bytes (a valid record header means uncompressed).
    #[default]
    Auto,
    /// No compression.
    None,
    /// A GZIP stream (RFC 1952); concatenated members are read as one stream.
    Gzip,
    /// A ZLIB stream (RFC 1950).
    Zlib,
}

impl Compression {
    /// The file-name suffix TensorFlow users conventionally give this compression.
    pub fn extension(self) -> &'static str {
        match self {
            Compression::Gzip => ".gz",
            Compression::Zlib => ".zlib",
            Compression::Auto | Compression::None => "",
        }
    }

    /// The compression a file name implies, if any (`.gz`/`.gzip` or `.zlib`/`.zz`).
    pub fn from_path(path: &Path) -> Option<Compression> {
        match path.extension()?.to_str()? {
            "gz" | "gzip" | "GZ" => Some(Compression::Gzip),
            "zlib" | "zz" | "ZLIB" => Some(Compression::Zlib),
            _ => None,
        }
    }
}

impl FromStr for Compression {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Compression::Auto),
            "none" | "" => Ok(Compression::None),
            "gzip" | "gz" => Ok(Compression::Gzip),
            "zlib" => Ok(Compression::Zlib),
            _ => Err(format!("unknown compression `{s}` (expected auto, none, gzip or zlib)")),
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Compression::Auto => "auto",
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zlib => "zlib",
        })
    }
}

/// Decides the compression of a stream whose name says nothing, from its first bytes.
///
/// A valid TFRecord header (length checksum holds) wins: an uncompressed file can start
/// with bytes that look like a GZIP or ZLIB header, but not with both that and a valid
/// length checksum, except with probability 2^-32.
pub fn detect_compression(head: &[u8]) -> Compression {
    if let Some(h) = head.get(..HEADER_LEN)
        && decode_header(h.try_into().expect("12 bytes")).is_ok()
    {
        return Compression::None;
    }
    match head {
        [0x1f, 0x8b, ..] => Compression::Gzip,
        [cmf, flg, ..]
            if cmf & 0x0f == 8 && cmf >> 4 <= 7 && (u16::from(*cmf) << 8 | u16::from(*flg)) % 31 == 0 =>
        {
            Compression::Zlib
        }
        _ => Compression::None,
    }
}

/// A decompressing byte source over a file (what [`open`](super::open) reads from).
pub enum Input<R: BufRead> {
    Plain(R),
    Gzip(Box<MultiGzDecoder<R>>),
    Zlib(Box<ZlibDecoder<R>>),
}

impl<R: BufRead> std::fmt::Debug for Input<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Input::Plain(_) => "Plain",
            Input::Gzip(_) => "Gzip",
            Input::Zlib(_) => "Zlib",
        })
    }
}

impl<R: BufRead> Input<R> {
    pub(crate) fn new(inner: R, compression: Compression) -> Self {
        match compression {
            Compression::Gzip => Input::Gzip(Box::new(MultiGzDecoder::new(inner))),
            Compression::Zlib => Input::Zlib(Box::new(ZlibDecoder::new(inner))),
            Compression::Auto | Compression::None => Input::Plain(inner),
        }
    }
}

impl<R: BufRead> Read for Input<R> {
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Input::Plain(r) => r.read(buf),
            Input::Gzip(r) => r.read(buf),
            Input::Zlib(r) => r.read(buf),
        }
    }
}

/// Decides the compression of a text file (lines, CSV) whose name says nothing: the GZIP
/// magic `1f 8b` means GZIP, anything else is read as is. Text has no record header to
/// validate, and a ZLIB header (`78 9c`: `x` and a byte that is not ASCII) is too easily
/// the start of a text, so ZLIB text needs its name (`.zlib`, `.zz`) or an explicit
/// choice.
pub fn detect_text_compression(head: &[u8]) -> Compression {
    match head {
        [0x1f, 0x8b, ..] => Compression::Gzip,
        _ => Compression::None,
    }
}

/// Opens `path` (a local file or an object's URL: [`storage::open`]) for reading with the
/// given compression, resolving `Auto`.
/// Returns the stream, the resolved compression and the file size in bytes (`None` when
/// it is not a regular file: a pipe's size is unknown).
pub(crate) fn open_input(
    path: &Path,
    compression: Compression,
) -> io::Result<(Input<BufReader<Source>>, Compression, Option<u64>)> {
    open_input_sniffed(path, compression, detect_compression)
}

/// [`open_input`], with `sniff` deciding an `Auto` compression the file name does not
/// imply from the file's first bytes (what it is given may be shorter than a header).
pub(crate) fn open_input_sniffed(
    path: &Path,
    compression: Compression,
    sniff: fn(&[u8]) -> Compression,
) -> io::Result<(Input<BufReader<Source>>, Compression, Option<u64>)> {
    // The size of a regular file or an object; a pipe's or a device's is unknown, not zero.
    let (file, size) = storage::open(path)?;
    // A small buffer: plain reads of the reader's large chunks bypass it, and the
    // decompressors read through it.
    let mut r = BufReader::with_capacity(64 * 1024, file);
    let resolved = match compression {
        Compression::Auto => match Compression::from_path(path) {
            Some(c) => c,
            None => sniff(r.fill_buf()?),
        },
        c => c,
    };
    Ok((Input::new(r, resolved), resolved, size))
}

/// A compressing byte sink.
pub(crate) enum Output<W: Write> {
    Plain(W),
    Gzip(GzEncoder<W>),
    Zlib(ZlibEncoder<W>),
}

impl<W: Write> Output<W> {
    pub(crate) fn new(inner: W, compression: Compression) -> Self {
        // TensorFlow writes with zlib's default level.
        let level = flate2::Compression::default();
        match compression {
            Compression::Gzip => Output::Gzip(GzEncoder::new(inner, level)),
            Compression::Zlib => Output::Zlib(ZlibEncoder::new(inner, level)),
            Compression::Auto | Compression::None => Output::Plain(inner),
        }
    }

    pub(crate) fn finish(self) -> io::Result<W> {
        match self {
            Output::Plain(w) => Ok(w),
            Output::Gzip(w) => w.finish(),
            Output::Zlib(w) => w.finish(),
        }
    }
}

impl<W: Write> Write for Output<W> {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Output::Plain(w) => w.write(buf),
            Output::Gzip(w) => w.write(buf),
            Output::Zlib(w) => w.write(buf),
        }
    }

    #[inline]
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Output::Plain(w) => w.write_all(buf),
            Output::Gzip(w) => w.write_all(buf),
            Output::Zlib(w) => w.write_all(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Output::Plain(w) => w.flush(),
            Output::Gzip(w) => w.flush(),
            Output::Zlib(w) => w.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tfrecord::encode_header;

    #[test]
    fn names_imply_compression() {
        assert_eq!(Compression::from_path(Path::new("a.tfrecord.gz")), Some(Compression::Gzip));
        assert_eq!(Compression::from_path(Path::new("a.tfrecord.zlib")), Some(Compression::Zlib));
        assert_eq!(Compression::from_path(Path::new("a.tfrecord")), None);
    }

    #[test]
    fn sniffing_prefers_a_valid_header() {
        assert_eq!(detect_compression(&[0x1f, 0x8b, 8, 0]), Compression::Gzip);
        assert_eq!(detect_compression(&[0x78, 0x9c, 0, 0]), Compression::Zlib);
        assert_eq!(detect_compression(&encode_header(5)), Compression::None);
        assert_eq!(detect_compression(b""), Compression::None);
        // A record of length 0x8b1f starts with the GZIP magic, but its header is valid.
        assert_eq!(detect_compression(&encode_header(0x8b1f)), Compression::None);
    }

    #[test]
    fn text_is_sniffed_for_gzip_only() {
        assert_eq!(detect_text_compression(&[0x1f, 0x8b, 8, 0]), Compression::Gzip);
        assert_eq!(detect_text_compression(&[0x78, 0x9c, 0, 0]), Compression::None);
        assert_eq!(detect_text_compression(b"a,b\n"), Compression::None);
        assert_eq!(detect_text_compression(b""), Compression::None);
    }

    #[test]
    fn parses_names() {
        assert_eq!("GZIP".parse::<Compression>(), Ok(Compression::Gzip));
        assert!("lz4".parse::<Compression>().is_err());
    }
}
