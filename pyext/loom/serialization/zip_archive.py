"""The zip container of PyTorch's checkpoint format: records stored uncompressed under one folder
("archive/data.pkl", "archive/data/0", ...).

Writing: each record's data starts at a multiple of 64 bytes (padding in an extra field of the
local header, as PyTorch's writer pads, so a reader may map the file and use the data in
place); CRC-32 and sizes are computed before a record is written, so no data descriptors are
needed and the output need not be seekable. Past 4 GiB (a record, an offset, or 65535 records)
the ZIP64 fields take over. Nothing is compressed.

Reading: the central directory (parsed by Python's zipfile) is validated before any record is
read: records stored, not compressed or encrypted; names unique; every record's bytes inside the
file; and the records' sizes summing to no more than the file's size, so a zip bomb (compressed
records, or many directory entries overlapping the same bytes) is refused before anything is
allocated. A record is read straight from its offset in the file into the caller's memory, and
its CRC-32 is checked.
"""

import struct
import zipfile
import zlib

_ALIGN = 64
_ZIP64_LIMIT = 0xFFFFFFFF  # sizes and offsets at or past this need the ZIP64 fields
_ZIP64_COUNT = 0xFFFF  # as do this many records
_LOCAL = struct.Struct("<IHHHHHIIIHH")  # local file header, before the name
_LOCAL_SIGNATURE = 0x04034B50
_PADDING_ID = 0x4246  # "FB": the extra field PyTorch's writer pads with


class ArchiveWriter:
    """Writes records one after the other to a binary file, then the directory (close())."""

    def __init__(self, f, folder):
        self.f, self.folder, self.pos, self.entries = f, folder, 0, []

    def _write(self, data):
        self.f.write(data)
        self.pos += len(data)

    def add(self, name, data):
        """A record holding `data` (a bytes-like object, or a list of them written in order)."""
        chunks = data if isinstance(data, list) else [data]
        chunks = [memoryview(c).cast("B") for c in chunks]
        size = sum(len(c) for c in chunks)
        crc = 0
        for c in chunks:
            crc = zlib.crc32(c, crc)
        name = f"{self.folder}/{name}".encode("utf-8")
        offset = self.pos
        zip64 = size >= _ZIP64_LIMIT or offset >= _ZIP64_LIMIT
        extra = struct.pack("<HHQQ", 1, 16, size, size) if zip64 else b""
        # Pad so the data starts at a multiple of _ALIGN (an extra field has a 4-byte header).
        start = offset + _LOCAL.size + len(name) + len(extra) + 4
        extra += struct.pack("<HH", _PADDING_ID, -start % _ALIGN) + b"Z" * (-start % _ALIGN)
        small = 0xFFFFFFFF if zip64 else size
        self._write(_LOCAL.pack(_LOCAL_SIGNATURE, 45 if zip64 else 20, 0, 0, 0, 0, crc, small, small, len(name),
                                len(extra)) + name + extra)
        for c in chunks:
            self._write(c)
        self.entries.append((name, offset, size, crc))

    def close(self):
        """Writes the central directory and the end records (ZIP64 ones where needed)."""
        start = self.pos
        any64 = len(self.entries) >= _ZIP64_COUNT
        for name, offset, size, crc in self.entries:
            zip64 = size >= _ZIP64_LIMIT or offset >= _ZIP64_LIMIT
            any64 = any64 or zip64
            extra = struct.pack("<HHQQQ", 1, 24, size, size, offset) if zip64 else b""
            small, at = (0xFFFFFFFF, 0xFFFFFFFF) if zip64 else (size, offset)
            version = 45 if zip64 else 20
            self._write(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, version, version, 0, 0, 0, 0, crc, small, small,
                                    len(name), len(extra), 0, 0, 0, 0, at) + name + extra)
        size = self.pos - start
        count = len(self.entries)
        if any64 or start >= _ZIP64_LIMIT or size >= _ZIP64_LIMIT:
            end64 = self.pos
            self._write(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, count, count, size, start))
            self._write(struct.pack("<IIQI", 0x07064B50, 0, end64, 1))
            count, size, start = 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF  # see the ZIP64 end record
        self._write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, size, start, 0))


class ArchiveReader:
    """The records of a zip archive in a Source (source.py), validated as the module says."""

    def __init__(self, source, error):
        self.source, self.error = source, error
        try:
            self.zip = zipfile.ZipFile(source.f)
            infos = self.zip.infolist()
        except OSError:
            raise
        except Exception as e:  # noqa: BLE001  zipfile raises many kinds on hostile bytes
            raise error(f"its zip directory is unreadable ({type(e).__name__}: {e})") from None
        names = [i.filename for i in infos]
        if len(set(names)) != len(names):
            twice = sorted({n for n in names if names.count(n) > 1})
            raise error(f"the zip directory lists the records {twice[:3]} more than once")
        total = 0
        self.offsets = {}  # name -> offset of its local header from the start of the source
        for i in infos:
            if i.compress_type != zipfile.ZIP_STORED:
                raise error(f"record {i.filename!r} is compressed (method {i.compress_type}); checkpoints store "
                            "their records uncompressed")
            if i.flag_bits & 0x1:
                raise error(f"record {i.filename!r} is encrypted")
            if i.file_size != i.compress_size:
                raise error(f"record {i.filename!r} declares {i.file_size} bytes but stores {i.compress_size}")
            offset = self.offsets[i.filename] = i.header_offset - source.start  # zipfile's: from the file's start
            if offset < 0 or offset + i.file_size > source.size:
                raise error(f"record {i.filename!r} ({i.file_size} bytes at {offset}) lies past the end of the file "
                            f"({source.size} bytes)")
            total += i.file_size
        if total > source.size:
            raise error(f"the zip directory declares {total} bytes of records in a file of {source.size} bytes: "
                        "records overlap (a zip bomb?)")
        self.infos = {i.filename: i for i in infos}

    def find(self, name):
        """The ZipInfo of record `name`, or None."""
        return self.infos.get(name)

    def _data_offset(self, info):
        offset = self.offsets[info.filename]
        self.source.seek(offset)
        head = self.source.read(_LOCAL.size)
        if len(head) != _LOCAL.size:
            raise self.error(f"the local header of record {info.filename!r} is cut off")
        fields = _LOCAL.unpack(head)
        if fields[0] != _LOCAL_SIGNATURE:
            raise self.error(f"record {info.filename!r} has no local header at offset {offset}")
        name_len, extra_len = fields[9], fields[10]
        name = self.source.read(name_len)
        if name.decode("utf-8", "replace") != info.filename and name.decode("cp437") != info.filename:
            raise self.error(f"the local header of record {info.filename!r} names {name!r}")
        start = offset + _LOCAL.size + name_len + extra_len
        if start + info.file_size > self.source.size:
            raise self.error(f"the data of record {info.filename!r} runs past the end of the file")
        return start

    def read_into(self, info, view):
        """Reads record `info` into `view` (a writable byte memoryview of exactly its size) and
        checks its CRC-32."""
        if len(view) != info.file_size:
            raise self.error(f"record {info.filename!r} holds {info.file_size} bytes, not the {len(view)} expected")
        self.source.seek(self._data_offset(info))
        if not self.source.read_into(view):
            raise self.error(f"the file ended inside record {info.filename!r}")
        if zlib.crc32(view) != info.CRC:
            raise self.error(f"record {info.filename!r} is corrupted: its CRC-32 does not match")

    def read(self, info):
        """The bytes of record `info` (for the small records: data.pkl, version, byteorder)."""
        data = bytearray(info.file_size)
        self.read_into(info, memoryview(data))
        return bytes(data)
