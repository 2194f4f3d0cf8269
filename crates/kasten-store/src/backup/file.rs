//! Reading a backup file: one pass that checks it all and finds where each table's rows
//! start, then the rows of a table read one at a time from there.

use super::*;

/// Where one table's rows are in a backup file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TableAt {
    pub(super) name: String,
    /// Offset just after the table's name (before `:` and the `[` of its rows).
    pub(super) offset: u64,
    pub(super) rows: u64,
}

/// A backup file that was read whole and found sound ([`BackupFile::scan`]).
#[derive(Debug, Clone)]
pub struct BackupFile {
    pub(super) path: PathBuf,
    /// The schema version the backup was written with.
    pub schema_version: u32,
    pub(super) tables: Vec<TableAt>,
}

impl BackupFile {
    /// Reads the whole file once, writing nothing: the header must be a Kasten backup's
    /// this build can restore, and every row must convert to the value a restore writes.
    /// Memory stays at one row.
    pub fn scan(path: &Path) -> Result<BackupFile, StoreError> {
        let name = path.display().to_string();
        let f =
            File::open(path).map_err(|e| StoreError::File(format!("cannot read {name}: {e}")))?;
        let pos = Rc::new(Cell::new(0u64));
        let reader = Counting {
            inner: BufReader::with_capacity(1 << 16, f),
            pos: Rc::clone(&pos),
        };
        let mut de = serde_json::Deserializer::from_reader(reader);
        let scanned = de
            .deserialize_map(DocVisitor { pos: &pos })
            .and_then(|doc| de.end().map(|()| doc))
            .map_err(|e| {
                let why = if e.is_eof() {
                    "it ends early (the file is cut off)".to_owned()
                } else if e.is_io() {
                    format!("it cannot be read ({e})")
                } else {
                    e.to_string()
                };
                StoreError::Corrupt(format!("{name} is not a Kasten backup: {why}"))
            })?;
        let schema_version = check_header(
            scanned.format.as_deref(),
            scanned.version,
            scanned.schema_version,
        )
        .map_err(|e| match e {
            StoreError::Corrupt(m) => StoreError::Corrupt(format!("{name}: {m}")),
            other => other,
        })?;
        let tables = scanned
            .tables
            .ok_or_else(|| StoreError::Corrupt(format!("{name}: it has no \"tables\"")))?;
        Ok(BackupFile {
            path: path.to_owned(),
            schema_version,
            tables,
        })
    }

    /// Rows per table, as the file holds them.
    pub fn counts(&self) -> BTreeMap<String, u64> {
        self.tables
            .iter()
            .map(|t| (t.name.clone(), t.rows))
            .collect()
    }

    pub(super) fn rows_of(&self, t: &TableAt) -> Result<RowReader, StoreError> {
        let damaged = |m: String| {
            StoreError::Corrupt(format!(
                "{} changed or is damaged since it was checked: {m}",
                self.path.display()
            ))
        };
        let mut f = File::open(&self.path)
            .map_err(|e| StoreError::File(format!("cannot read {}: {e}", self.path.display())))?;
        f.seek(SeekFrom::Start(t.offset))
            .map_err(|e| damaged(e.to_string()))?;
        let mut r = BufReader::with_capacity(1 << 16, f);
        for want in [b':', b'['] {
            match next_byte(&mut r).map_err(|e| damaged(e.to_string()))? {
                Some(b) if b == want => {}
                _ => return Err(damaged(format!("table {} is not where it was", t.name))),
            }
        }
        Ok(RowReader {
            reader: r,
            table: t.name.clone(),
            first: true,
            finished: false,
            damaged: self.path.display().to_string(),
        })
    }
}

/// Skips whitespace and returns (consuming) the next byte.
fn next_byte(r: &mut impl BufRead) -> std::io::Result<Option<u8>> {
    loop {
        let (b, n) = {
            let buf = r.fill_buf()?;
            let Some(&b) = buf.first() else {
                return Ok(None);
            };
            (b, 1)
        };
        r.consume(n);
        if !b.is_ascii_whitespace() {
            return Ok(Some(b));
        }
    }
}

/// Peeks (without consuming) the next byte that is not whitespace.
fn peek_byte(r: &mut impl BufRead) -> std::io::Result<Option<u8>> {
    loop {
        let buf = r.fill_buf()?;
        let Some(&b) = buf.first() else {
            return Ok(None);
        };
        if !b.is_ascii_whitespace() {
            return Ok(Some(b));
        }
        r.consume(1);
    }
}

/// The rows of one table, one at a time. Every row is a JSON object (the scan checked),
/// and serde_json reads nothing past an object's closing brace, so each row is parsed by
/// a deserializer of its own straight from the file.
pub(super) struct RowReader {
    reader: BufReader<File>,
    table: String,
    first: bool,
    finished: bool,
    damaged: String,
}

impl RowReader {
    pub(super) fn next_row(&mut self) -> Result<Option<Json>, StoreError> {
        if self.finished {
            return Ok(None);
        }
        let damaged = |m: String| {
            StoreError::Corrupt(format!(
                "{} changed or is damaged since it was checked (table {}): {m}",
                self.damaged, self.table
            ))
        };
        let io = |e: std::io::Error| damaged(e.to_string());
        if !self.first {
            match next_byte(&mut self.reader).map_err(io)? {
                Some(b',') => {}
                Some(b']') => {
                    self.finished = true;
                    return Ok(None);
                }
                _ => return Err(damaged("expected , or ]".into())),
            }
        } else if peek_byte(&mut self.reader).map_err(io)? == Some(b']') {
            self.reader.consume(1);
            self.finished = true;
            return Ok(None);
        }
        self.first = false;
        if peek_byte(&mut self.reader).map_err(io)? != Some(b'{') {
            return Err(damaged("a row is not an object".into()));
        }
        let mut de = serde_json::Deserializer::from_reader(&mut self.reader);
        let row = serde::Deserialize::deserialize(&mut de).map_err(|e| damaged(e.to_string()))?;
        Ok(Some(row))
    }
}

/// A reader that counts the bytes taken from it.
struct Counting<R> {
    inner: R,
    pos: Rc<Cell<u64>>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.pos.set(self.pos.get() + n as u64);
        Ok(n)
    }
}

#[derive(Default)]
struct Scanned {
    format: Option<String>,
    version: Option<u64>,
    schema_version: Option<u64>,
    tables: Option<Vec<TableAt>>,
}

struct DocVisitor<'a> {
    pos: &'a Rc<Cell<u64>>,
}

impl<'de> Visitor<'de> for DocVisitor<'_> {
    type Value = Scanned;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Kasten backup (a JSON object)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scanned, A::Error> {
        let mut s = Scanned::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "format" => s.format = map.next_value::<Option<String>>()?,
                "version" => s.version = map.next_value::<Option<u64>>()?,
                "schema_version" => s.schema_version = map.next_value::<Option<u64>>()?,
                "tables" => {
                    if s.tables.is_some() {
                        return Err(serde::de::Error::custom("\"tables\" appears twice"));
                    }
                    s.tables = Some(map.next_value_seed(TablesSeed { pos: self.pos })?);
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(s)
    }
}

struct TablesSeed<'a> {
    pos: &'a Rc<Cell<u64>>,
}

impl<'de> DeserializeSeed<'de> for TablesSeed<'_> {
    type Value = Vec<TableAt>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<TableAt>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for TablesSeed<'_> {
    type Value = Vec<TableAt>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("\"tables\": an object of tables")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<TableAt>, A::Error> {
        let mut out: Vec<TableAt> = Vec::new();
        let mut seen = HashSet::new();
        while let Some(name) = map.next_key::<String>()? {
            // serde_json has read the name's closing quote and nothing after it
            let offset = self.pos.get();
            if !valid_table(&name) {
                return Err(serde::de::Error::custom(format!("table name '{name}'")));
            }
            if !seen.insert(name.clone()) {
                return Err(serde::de::Error::custom(format!(
                    "table {name} appears twice"
                )));
            }
            let rows = map.next_value_seed(RowsSeed { table: &name })?;
            out.push(TableAt { name, offset, rows });
        }
        Ok(out)
    }
}

struct RowsSeed<'a> {
    table: &'a str,
}

impl<'de> DeserializeSeed<'de> for RowsSeed<'_> {
    type Value = u64;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<u64, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for RowsSeed<'_> {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "table {} as a list of rows", self.table)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<u64, A::Error> {
        let mut n = 0u64;
        while let Some(row) = seq.next_element::<Json>()? {
            n += 1;
            if !row.is_object() {
                return Err(serde::de::Error::custom(format!(
                    "row {n} of table {} is not an object",
                    self.table
                )));
            }
            // the conversion a restore makes: a value it could not write fails here,
            // before anything is written
            from_json(&row).map_err(|e| {
                serde::de::Error::custom(format!("row {n} of table {}: {e}", self.table))
            })?;
        }
        Ok(n)
    }
}
