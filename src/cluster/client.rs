//! The object store client of the shared store (`--store s3://bucket/prefix`):
//! named objects under the prefix, conditional puts, uploads and downloads.
//!
//! The client is `object_store`'s S3 client, configured from the usual AWS
//! variables (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
//! `AWS_ENDPOINT_URL` for an S3-compatible server, `AWS_ALLOW_HTTP=true` for
//! a plain-HTTP one). Its own retries (5xx, 429, timeouts; exponential
//! backoff with jitter) are capped here at 4 attempts and 30 s a request;
//! callers retry whole operations with their own backoff above that. Its
//! IO runs on one runtime of its own, so the store's threads call it
//! blocking and async code awaits it without tying up a worker.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as Key;
use object_store::prefix::PrefixStore;
use object_store::{
    ClientConfigKey, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, RetryConfig,
    UpdateVersion,
};

use super::error::ClusterError;

/// The runtime every object store request runs on.
fn io_runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("stormwatch-s3")
            .enable_all()
            .build()
            .expect("starting the object store's runtime")
    })
}

/// An object's version, for a conditional put over it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub e_tag: Option<String>,
    pub version: Option<String>,
}

impl From<&object_store::ObjectMeta> for Version {
    fn from(m: &object_store::ObjectMeta) -> Version {
        Version {
            e_tag: m.e_tag.clone(),
            version: m.version.clone(),
        }
    }
}

impl From<Version> for UpdateVersion {
    fn from(v: Version) -> UpdateVersion {
        UpdateVersion {
            e_tag: v.e_tag,
            version: v.version,
        }
    }
}

/// How a conditional put ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Put {
    /// Written; its new version.
    Done(Version),
    /// The object was there already (create), or changed since it was read
    /// (update): someone else wrote it.
    Lost,
}

/// A listed object: its key under the prefix, and its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    pub name: String,
    pub size: u64,
}

/// The shared store: the bucket seen from under its prefix
/// (`PrefixStore`), so every name here is relative to the prefix.
#[derive(Clone)]
pub struct Remote {
    url: String,
    store: Arc<dyn ObjectStore>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote").field("url", &self.url).finish()
    }
}

impl Remote {
    /// `s3://bucket[/prefix]`, with credentials, region and endpoint from
    /// the environment.
    pub fn open(url: &str) -> Result<Remote, ClusterError> {
        let bad = |why: &str| ClusterError::Address {
            context: format!("--store {url}"),
            message: format!("{why}; expected a local path or s3://bucket/prefix"),
        };
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| bad("not an s3:// address"))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(bad("no bucket"));
        }
        let prefix = prefix.trim_matches('/').to_string();
        if prefix.split('/').any(|s| s == "." || s == "..") {
            return Err(bad("a prefix with . or .. in it"));
        }
        let store = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_retry(RetryConfig {
                max_retries: 3,
                retry_timeout: Duration::from_secs(30),
                ..RetryConfig::default()
            })
            // Over what the environment set (AWS_ALLOW_HTTP among it), not
            // instead of it.
            .with_config(
                AmazonS3ConfigKey::Client(ClientConfigKey::Timeout),
                "30 seconds",
            )
            .with_config(
                AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout),
                "5 seconds",
            )
            .build()
            .map_err(|source| ClusterError::Client {
                context: format!("--store {url}"),
                source,
            })?;
        Ok(Remote {
            url: url.to_string(),
            store: Arc::new(PrefixStore::new(store, prefix.as_str())),
        })
    }

    /// A shared store in memory (`memory://<name>`), for tests: the same
    /// conditional puts, listings and deletes as S3's.
    pub fn in_memory(name: &str) -> Remote {
        Remote {
            url: format!("memory://{name}"),
            store: Arc::new(object_store::memory::InMemory::new()),
        }
    }

    /// The address as given (`s3://…`).
    pub fn url(&self) -> &str {
        &self.url
    }

    fn key(name: &str) -> Key {
        Key::from(name)
    }

    fn err(&self, doing: String, source: object_store::Error) -> ClusterError {
        ClusterError::Request {
            context: format!("{doing} ({})", self.url),
            source,
        }
    }

    /// One request to the shared store, at start: a missing bucket, a
    /// wrong endpoint or missing credentials are refused here, with what to
    /// check, rather than at the first flush.
    pub async fn check(&self) -> Result<(), ClusterError> {
        let Err(e) = self.list_dirs("").await else {
            return Ok(());
        };
        let cause = e.to_string();
        let env = |k: &str| std::env::var(k).unwrap_or_default();
        let endpoint = env("AWS_ENDPOINT_URL");
        let hint = if cause.contains("NoSuchBucket") || cause.contains("bucket does not exist") {
            "the bucket does not exist: create it, or name another".to_string()
        } else if cause.contains("169.254.169.254") && env("AWS_ACCESS_KEY_ID").is_empty() {
            "no credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set, and no instance metadata gave any".to_string()
        } else if endpoint.starts_with("http://")
            && !env("AWS_ALLOW_HTTP").eq_ignore_ascii_case("true")
        {
            format!(
                "AWS_ENDPOINT_URL is plain HTTP ({endpoint}): set AWS_ALLOW_HTTP=true to allow it"
            )
        } else if cause.contains("error sending request") || cause.contains("onnect") {
            format!(
                "nothing answered at {}",
                if endpoint.is_empty() {
                    "the AWS endpoint (AWS_ENDPOINT_URL unset)"
                } else {
                    &endpoint
                }
            )
        } else {
            "check the bucket, the endpoint (AWS_ENDPOINT_URL) and the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION)".to_string()
        };
        Err(ClusterError::Unreachable {
            context: format!("the shared store {} cannot be read", self.url),
            hint,
            source: Box::new(e),
        })
    }

    /// Run an object store request from a thread that is not async.
    pub fn block<T>(fut: impl std::future::Future<Output = T>) -> T {
        io_runtime().block_on(fut)
    }

    /// Run it from async code, on the store's own runtime.
    pub async fn run<T: Send + 'static>(
        fut: impl std::future::Future<Output = T> + Send + 'static,
    ) -> T {
        io_runtime()
            .spawn(fut)
            .await
            .expect("an object store request panicked")
    }

    /// The object's bytes and version; `None` when there is none.
    pub async fn get(&self, name: &str) -> Result<Option<(Bytes, Version)>, ClusterError> {
        match self.store.get(&Self::key(name)).await {
            Ok(r) => {
                let version = Version::from(&r.meta);
                let bytes = r
                    .bytes()
                    .await
                    .map_err(|e| self.err(format!("reading {name}"), e))?;
                Ok(Some((bytes, version)))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.err(format!("reading {name}"), e)),
        }
    }

    /// The object's metadata (`HEAD`), `None` when there is none.
    async fn head(&self, name: &str) -> Result<Option<object_store::ObjectMeta>, ClusterError> {
        match self.store.head(&Self::key(name)).await {
            Ok(m) => Ok(Some(m)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.err(format!("looking up {name}"), e)),
        }
    }

    /// The object's size, `None` when there is none.
    pub async fn size(&self, name: &str) -> Result<Option<u64>, ClusterError> {
        Ok(self.head(name).await?.map(|m| m.size))
    }

    /// The object's version, `None` when there is none.
    pub async fn version(&self, name: &str) -> Result<Option<Version>, ClusterError> {
        Ok(self.head(name).await?.as_ref().map(Version::from))
    }

    /// Write an object whatever is there (a name only this writer uses).
    pub async fn put(&self, name: &str, bytes: Bytes) -> Result<(), ClusterError> {
        self.store
            .put(&Self::key(name), PutPayload::from(bytes))
            .await
            .map(|_| ())
            .map_err(|e| self.err(format!("writing {name}"), e))
    }

    /// Write an object only if there is none (`If-None-Match: *`), or only
    /// if it is still at `over` (`If-Match`).
    pub async fn put_if(
        &self,
        name: &str,
        bytes: Bytes,
        over: Option<Version>,
    ) -> Result<Put, ClusterError> {
        let mode = match over {
            None => PutMode::Create,
            Some(v) => PutMode::Update(v.into()),
        };
        let opts = PutOptions {
            mode,
            ..PutOptions::default()
        };
        match self
            .store
            .put_opts(&Self::key(name), PutPayload::from(bytes), opts)
            .await
        {
            Ok(r) => Ok(Put::Done(Version {
                e_tag: r.e_tag,
                version: r.version,
            })),
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. }
                // If-Match over an object deleted meanwhile.
                | object_store::Error::NotFound { .. },
            ) => Ok(Put::Lost),
            Err(e) => Err(self.err(format!("writing {name} conditionally"), e)),
        }
    }

    /// Upload a local file to `name`, in parts when large.
    pub async fn upload(&self, name: &str, path: &std::path::Path) -> Result<u64, ClusterError> {
        let file = tokio::fs::File::open(path)
            .await
            .map_err(|e| ClusterError::file(format!("opening {}", path.display()), e))?;
        let len = file
            .metadata()
            .await
            .map_err(|e| ClusterError::file(format!("reading {}", path.display()), e))?
            .len();
        let mut writer =
            object_store::buffered::BufWriter::new(Arc::clone(&self.store), Self::key(name));
        let mut reader = tokio::io::BufReader::with_capacity(1 << 20, file);
        let sent = match tokio::io::copy(&mut reader, &mut writer).await {
            Ok(_) => tokio::io::AsyncWriteExt::shutdown(&mut writer).await,
            Err(e) => Err(e),
        };
        if let Err(e) = sent {
            // A multipart upload left open would be kept (and billed) by
            // the store until a lifecycle rule removed it.
            let _ = writer.abort().await;
            return Err(ClusterError::Upload {
                context: format!("uploading {} to {name}", path.display()),
                source: e,
            });
        }
        Ok(len)
    }

    /// Download `name` to a local file (written, then fsynced).
    pub async fn download(&self, name: &str, path: &std::path::Path) -> Result<u64, ClusterError> {
        let r = self
            .store
            .get(&Self::key(name))
            .await
            .map_err(|e| self.err(format!("downloading {name}"), e))?;
        let mut stream = r.into_stream();
        let mut file = tokio::fs::File::create(path)
            .await
            .map_err(|e| ClusterError::file(format!("creating {}", path.display()), e))?;
        let mut n = 0u64;
        while let Some(chunk) = stream
            .try_next()
            .await
            .map_err(|e| self.err(format!("downloading {name}"), e))?
        {
            n += chunk.len() as u64;
            tokio::io::AsyncWriteExt::write_all(&mut file, &chunk)
                .await
                .map_err(|e| ClusterError::file(format!("writing {}", path.display()), e))?;
        }
        file.sync_all()
            .await
            .map_err(|e| ClusterError::file(format!("syncing {}", path.display()), e))?;
        Ok(n)
    }

    /// Delete an object (none there is no error).
    pub async fn delete(&self, name: &str) -> Result<(), ClusterError> {
        match self.store.delete(&Self::key(name)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.err(format!("deleting {name}"), e)),
        }
    }

    /// The objects whose names start with `dir/`, every level down.
    pub async fn list(&self, dir: &str) -> Result<Vec<Object>, ClusterError> {
        let prefix = Self::key(dir);
        let metas: Vec<_> = self
            .store
            .list(Some(&prefix))
            .try_collect()
            .await
            .map_err(|e| self.err(format!("listing {dir}/"), e))?;
        Ok(metas
            .into_iter()
            .map(|m| Object {
                name: m.location.to_string(),
                size: m.size,
            })
            .collect())
    }

    /// The "directories" right under `dir/`.
    pub async fn list_dirs(&self, dir: &str) -> Result<Vec<String>, ClusterError> {
        let prefix = Self::key(dir);
        let r = self
            .store
            .list_with_delimiter(Some(&prefix))
            .await
            .map_err(|e| self.err(format!("listing {dir}/"), e))?;
        Ok(r.common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .collect())
    }
}
