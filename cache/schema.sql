-- schema.sql — the autotune cache, schema version 1 (cache.h AT_SCHEMA_VERSION).
-- cache.c runs this whole file in one transaction on a new, empty database;
-- the last statement sets user_version, which says the schema is complete.
-- A change here bumps the version (and the PRAGMA below, and AT_SCHEMA_VERSION:
-- the build checks the two agree); the runtime library reads the winners
-- table by these column names (kernels/atk_sqlite.c) [CACHE_KEY].
--
-- Embedded at build time by cmake/at_embed_sql.cmake: "--" comments are
-- dropped and whitespace is collapsed, so no literal may contain "--".
-- Doubles are stored as REAL; a NaN (not measured) is stored as NULL.

-- One GPU as the tuner saw it, with its measured ceilings.
CREATE TABLE devices (
  name TEXT NOT NULL,
  cc_major INTEGER NOT NULL,
  cc_minor INTEGER NOT NULL,
  sms INTEGER NOT NULL,
  l2_bytes INTEGER NOT NULL,
  mem_bytes INTEGER NOT NULL,
  driver_version INTEGER NOT NULL,
  nvrtc_major INTEGER NOT NULL,
  nvrtc_minor INTEGER NOT NULL,
  read_gbps REAL,     -- streaming-read ceiling, GB/s
  copy_gbps REAL,     -- device copy, read + write GB/s
  empty_us REAL,      -- empty kernel in graph replay
  measured_at TEXT NOT NULL,
  PRIMARY KEY (name, cc_major, cc_minor, sms)
);

-- Every candidate's result under a key (failed ones too: state + reason).
-- key_sha is the digest of the readable key columns after it (key.c).
CREATE TABLE trials (
  id INTEGER PRIMARY KEY,
  key_sha TEXT NOT NULL,
  op TEXT NOT NULL,
  dtype TEXT NOT NULL,
  shape TEXT NOT NULL,
  device TEXT NOT NULL,
  cc INTEGER NOT NULL,
  sms INTEGER NOT NULL,
  driver_version INTEGER NOT NULL,
  nvrtc_version INTEGER NOT NULL,
  space_sha TEXT NOT NULL,
  options TEXT NOT NULL,
  tuner_version TEXT NOT NULL,
  strategy TEXT NOT NULL,
  params TEXT NOT NULL,
  state TEXT NOT NULL,  -- at_trial_state_name
  reason TEXT NOT NULL,
  us REAL,
  us_min REAL,
  us_max REAL,
  stream_us REAL,
  rel_err REAL,
  regs INTEGER NOT NULL,
  spill_bytes INTEGER NOT NULL,
  smem_bytes INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  UNIQUE (key_sha, strategy, params)
);

-- The answer per key: a generated kernel (with its cubin) or the baseline.
CREATE TABLE winners (
  key_sha TEXT NOT NULL,
  op TEXT NOT NULL,
  dtype TEXT NOT NULL,
  shape TEXT NOT NULL,
  device TEXT NOT NULL,
  cc INTEGER NOT NULL,
  sms INTEGER NOT NULL,
  driver_version INTEGER NOT NULL,
  nvrtc_version INTEGER NOT NULL,
  space_sha TEXT NOT NULL,
  options TEXT NOT NULL,
  tuner_version TEXT NOT NULL,
  strategy TEXT NOT NULL,
  kernel TEXT NOT NULL,
  template_name TEXT NOT NULL,
  params TEXT NOT NULL,
  us REAL,
  us_min REAL,
  us_max REAL,
  baseline_us REAL,
  baseline_min REAL,
  baseline_max REAL,
  speedup REAL,
  bytes REAL,
  grid_x INTEGER NOT NULL,
  grid_y INTEGER NOT NULL,
  grid_z INTEGER NOT NULL,
  block_x INTEGER NOT NULL,
  block_y INTEGER NOT NULL,
  block_z INTEGER NOT NULL,
  smem INTEGER NOT NULL,
  cubin BLOB,           -- NULL for the baseline
  cubin_sha TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (key_sha)
);

-- Warm start and the tables read winners by problem.
CREATE INDEX winners_by_problem ON winners (device, cc, sms, op, dtype, shape);

-- What `autotune validate` measured per call shape of one GPU: the
-- runtime's choice there (path, the key digest of the entry it chose) against
-- its fallback. A row whose verdict is 'slower' or 'wrong' is an override:
-- the runtime falls back at that call shape while `chosen` still serves it
-- (kernels/atk_validations.c reads these columns). Optional in version 1:
-- a cache made before it gets it from its first validation (cache_validation.c
-- runs this statement alone), and readers treat a missing table as no rows.
CREATE TABLE IF NOT EXISTS validations (
  device TEXT NOT NULL,
  cc INTEGER NOT NULL,
  sms INTEGER NOT NULL,
  op TEXT NOT NULL,
  dtype TEXT NOT NULL,
  shape TEXT NOT NULL,      -- the call: 12x2048x8192, 5x2048
  path TEXT NOT NULL,       -- tuned, bucket, inferred, fallback
  chosen TEXT NOT NULL,     -- key_sha of the entry that served it; empty on fallback
  strategy TEXT NOT NULL,
  from_shape TEXT NOT NULL, -- the tuned shape the kernel comes from
  bucket INTEGER NOT NULL,  -- the tuned M (T) of a bucket or inferred choice
  us REAL,
  us_min REAL,
  us_max REAL,
  baseline_us REAL,
  baseline_min REAL,
  baseline_max REAL,
  noise REAL,               -- half the p10..p90 spread, the larger of the two
  rel_err REAL,
  verdict TEXT NOT NULL,    -- ok, fallback, slower, wrong, harness
  reason TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (device, cc, sms, op, dtype, shape)
);

PRAGMA user_version = 1;
