//! The client, for JavaScript: how to reach Redis and every call, each one a Promise
//! (`cancel.rs`).

use std::sync::Arc;

use fencelock_bind::config::{Connection, Deployment, Options, Pem, Replicas, Secret};
use fencelock_bind::held::GiveBack;
use napi::bindgen_prelude::{BigInt, Buffer, Either4, PromiseRaw, within_runtime_if_available};
use napi::{Env, Result};
use napi_derive::napi;

use crate::acquire::{Reentrant, acquire};
use crate::admin::{self, ListingValue, LockInfoValue, Releases};
use crate::cancel::{Cancel, Stop, answer, call, call_holding};
use crate::election::{self, LeaderValue, Leadership, Observer};
use crate::env::{Context, context, keeper};
use crate::errors::{Failure, millis_opt};
use crate::fenced::{self, Write};
use crate::guard::Guard;
use crate::recipes::{self, MultiGuard, OnceDone, OnceGaveUp, OnceLate, OnceRun, OnceTick};
use crate::spec::Args;

/// A client's options, as the package's JavaScript passes them (milliseconds; TLS material as
/// PEM).
#[napi(object)]
pub struct ClientOptions {
    pub key_prefix: Option<String>,
    pub command_timeout: Option<f64>,
    pub instance_timeout: Option<f64>,
    pub tls_ca: Option<Buffer>,
    pub tls_cert: Option<Buffer>,
    pub tls_key: Option<Buffer>,
    pub master_username: Option<String>,
    pub master_password: Option<String>,
    pub wait_for_replicas: Option<u32>,
    pub replica_timeout: Option<f64>,
    pub replica_shortfall: Option<String>,
}

/// A fencelock client. It connects on first use.
#[napi]
pub struct Client {
    client: Arc<fencelock::Client>,
}

#[napi]
impl Client {
    /// `deployment` is `server`, `redlock`, `cluster` or `sentinel`; `urls` the servers' URLs
    /// (one for `server`); `master` the Sentinel master's name.
    #[napi(constructor)]
    pub fn new(
        env: Env,
        deployment: String,
        urls: Vec<String>,
        master: Option<String>,
        options: Option<ClientOptions>,
    ) -> Result<Self> {
        let client =
            Self::build(&env, deployment, urls, master, options).map_err(|f| f.into_js(&env))?;
        Ok(Client { client })
    }

    /// The server (or servers) this client talks to, without any password.
    #[napi(getter)]
    pub fn server(&self) -> String {
        self.client.server().to_owned()
    }

    /// Gives back what this client's holds still hold (its `close()`): guards released,
    /// leaderships resigned, runs given up, on this thread; then closes the client (the
    /// library's `Client::close`: its listener ends, its connections close, and every later
    /// call through it fails with the `closed` error). Resolves when all that is done; it
    /// goes on to its end whatever JavaScript does meanwhile.
    #[napi]
    pub fn close_holds<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
        let keeper = keeper(env)?;
        let busy = keeper.busy();
        let ends = keeper.end_client(&self.client);
        let client = self.client.clone();
        call(
            env,
            Stop::Never,
            async move {
                ends.await;
                // The give-backs of the waits the closing ended, counted as the client's
                // background work, go first (at most the packages' bound for them).
                client.wait_idle(fencelock_bind::keeper::CLOSE_IDLE).await;
                client.close().await;
                drop(busy);
            },
            |_, ()| Ok(()),
        )
    }

    /// Acquires the lock the arguments describe (as `checkSpec` takes them): the guard, or
    /// `null` with `tryOnly` when it is held.
    #[napi(ts_return_type = "Promise<Guard | null>")]
    #[allow(clippy::too_many_arguments)]
    pub fn acquire<'env>(
        &self,
        env: &'env Env,
        kind: String,
        name: String,
        ttl: Option<f64>,
        wait: Option<f64>,
        queue_timeout: Option<f64>,
        max_hold: Option<f64>,
        lock_delay: Option<f64>,
        auto_renew: Option<bool>,
        permits: Option<u32>,
        take: Option<u32>,
        label: Option<String>,
        try_only: bool,
        cancel: Option<&Cancel>,
    ) -> Result<PromiseRaw<'env, Option<Guard>>> {
        let args = Args {
            kind,
            name,
            ttl,
            wait,
            queue_timeout,
            max_hold,
            lock_delay,
            auto_renew,
            permits,
            take,
            label,
        };
        let spec = args.spec().map_err(|f| f.into_js(env))?;
        let Some(request) = spec.request(&self.client) else {
            return Err(Failure::invalid(
                spec.name(),
                "a reentrant lock is acquired through its handle",
            )
            .into_js(env));
        };
        acquire(env, self.context(env)?, request, try_only, cancel)
    }

    /// A reentrant lock's handle: the acquisitions made through it share one owner.
    #[napi]
    pub fn reentrant(&self, name: String, max_reentry: Option<u32>) -> Reentrant {
        let mut handle = self.client.reentrant_lock(name.clone());
        if let Some(limit) = max_reentry {
            handle = handle.max_reentry(limit);
        }
        Reentrant {
            name,
            client: self.client.clone(),
            handle,
        }
    }

    /// Asks the holders of lock `name` to release it: `true` if it was held.
    #[napi]
    pub fn request_release<'env>(
        &self,
        env: &'env Env,
        name: String,
    ) -> Result<PromiseRaw<'env, bool>> {
        let client = self.client.clone();
        answer(
            env,
            async move { client.request_release(name).await },
            |b| b,
        )
    }

    /// Campaigns in election `name` with `value` (the leadership's hold labelled `label`, if
    /// given): the leadership.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn campaign<'env>(
        &self,
        env: &'env Env,
        name: String,
        value: String,
        ttl: Option<f64>,
        wait: Option<f64>,
        label: Option<String>,
        cancel: Option<&Cancel>,
    ) -> Result<PromiseRaw<'env, Leadership>> {
        let mut campaign = self.client.election(name.clone()).campaign(value);
        let (ttl, wait) = lease_and_wait(&name, ttl, wait).map_err(|f| f.into_js(env))?;
        if let Some(ttl) = ttl {
            campaign = campaign.ttl(ttl);
        }
        if let Some(label) = label {
            campaign = campaign.label(label);
        }
        let campaign = campaign.wait(wait);
        let context = self.context(env)?;
        call_holding(
            env,
            Stop::AtEnd(cancel),
            campaign.campaign(),
            move |_, result| Ok(Leadership::new(result?, context)),
            |result| result.ok().map(GiveBack::give_back),
        )
    }

    /// The leader of election `name`, or `null`.
    #[napi]
    pub fn leader<'env>(
        &self,
        env: &'env Env,
        name: String,
    ) -> Result<PromiseRaw<'env, Option<LeaderValue>>> {
        let client = self.client.clone();
        answer(
            env,
            async move { client.election(name).leader().await },
            |leader| leader.as_ref().map(election::leader_value),
        )
    }

    /// An observer of election `name`'s leaders.
    #[napi]
    pub fn observe<'env>(
        &self,
        env: &'env Env,
        name: String,
    ) -> Result<PromiseRaw<'env, Observer>> {
        let client = self.client.clone();
        answer(
            env,
            async move { client.election(name).observe().await },
            Observer::new,
        )
    }

    /// Writes `writes` to `resource` if `fence` is not older than the one it accepted last:
    /// the fence now accepted.
    #[napi]
    pub fn fenced_apply<'env>(
        &self,
        env: &'env Env,
        resource: String,
        fence: BigInt,
        writes: Vec<Write>,
    ) -> Result<PromiseRaw<'env, u64>> {
        let checked = (|| {
            let fence = fenced::fence(&resource, &fence)?;
            let writes = fenced::writes(&resource, writes)?;
            let store = self.client.fenced_store(resource)?;
            Ok::<_, Failure>((fence, writes, store))
        })();
        let (fence, writes, store) = checked.map_err(|f| f.into_js(env))?;
        answer(env, async move { store.apply(fence, &writes).await }, |f| f)
    }

    /// The fence `resource` accepted last (0: none yet).
    #[napi]
    pub fn fenced_accepted<'env>(
        &self,
        env: &'env Env,
        resource: String,
    ) -> Result<PromiseRaw<'env, u64>> {
        let store = self
            .client
            .fenced_store(resource)
            .map_err(|e| Failure::Lock(e).into_js(env))?;
        answer(env, async move { store.accepted().await }, |f| f)
    }

    /// Takes every lock of `names`, or none (each name's hold labelled `label`, if given): the
    /// multi-lock guard.
    #[napi]
    pub fn multi_acquire<'env>(
        &self,
        env: &'env Env,
        names: Vec<String>,
        ttl: Option<f64>,
        wait: Option<f64>,
        label: Option<String>,
        cancel: Option<&Cancel>,
    ) -> Result<PromiseRaw<'env, MultiGuard>> {
        let first = names.first().cloned().unwrap_or_default();
        let mut request = self.client.multi_lock(names);
        let (ttl, wait) = lease_and_wait(&first, ttl, wait).map_err(|f| f.into_js(env))?;
        if let Some(ttl) = ttl {
            request = request.ttl(ttl);
        }
        if let Some(label) = label {
            request = request.label(label);
        }
        let request = request.wait(wait);
        let context = self.context(env)?;
        call_holding(
            env,
            Stop::AtEnd(cancel),
            request.acquire(),
            move |_, result| Ok(MultiGuard::new(result?, context)),
            |result| result.ok().map(GiveBack::give_back),
        )
    }

    /// Begins the work to do once under `key` (on the lock `lock`, the key by default; with
    /// `tick`, once per tick of a scheduled job, the record kept `keep` milliseconds; after
    /// `attempts` failed runs, starts give up): the record if it was done, the too-late start if
    /// it came too late for its tick, the start that gave up, else the run holding the lock.
    #[napi(ts_return_type = "Promise<OnceRun | OnceDone | OnceLate | OnceGaveUp>")]
    #[allow(clippy::too_many_arguments)]
    pub fn once_begin<'env>(
        &self,
        env: &'env Env,
        key: String,
        lock: Option<String>,
        ttl: Option<f64>,
        wait: Option<f64>,
        label: Option<String>,
        keep: Option<f64>,
        tick: Option<OnceTick>,
        attempts: Option<u32>,
        cancel: Option<&Cancel>,
    ) -> Result<PromiseRaw<'env, Either4<OnceRun, OnceDone, OnceLate, OnceGaveUp>>> {
        let name = lock.unwrap_or_else(|| key.clone());
        let once = (|| {
            let mut once = self.client.once(key).lock(name.clone());
            let (ttl, wait) = lease_and_wait(&name, ttl, wait)?;
            if let Some(ttl) = ttl {
                once = once.ttl(ttl);
            }
            if let Some(label) = label {
                once = once.label(label);
            }
            if let Some(keep) = millis_opt(&name, "keep", keep)? {
                once = once.keep(keep);
            }
            if let Some(tick) = tick {
                once = once.tick(tick.tick(&name)?);
            }
            if let Some(attempts) = attempts {
                once = once.attempts(attempts);
            }
            Ok::<_, Failure>(once.wait(wait))
        })()
        .map_err(|f| f.into_js(env))?;
        let context = self.context(env)?;
        call_holding(
            env,
            Stop::AtEnd(cancel),
            once.begin(),
            move |_, result| Ok(recipes::begun(result?, context)),
            fencelock_bind::holds::undo_begun,
        )
    }

    /// The state of lock `name`.
    #[napi]
    pub fn inspect<'env>(
        &self,
        env: &'env Env,
        name: String,
    ) -> Result<PromiseRaw<'env, LockInfoValue>> {
        let client = self.client.clone();
        answer(env, async move { client.inspect(name).await }, |i| {
            admin::info(&i)
        })
    }

    /// The held locks whose name matches `pattern`.
    #[napi]
    pub fn list<'env>(
        &self,
        env: &'env Env,
        pattern: String,
    ) -> Result<PromiseRaw<'env, ListingValue>> {
        let client = self.client.clone();
        answer(
            env,
            async move { client.list(&pattern).await },
            admin::listing,
        )
    }

    /// Deletes lock `name` whoever holds it (an operator's tool): `true` if it was held. It
    /// goes on to its end whatever JavaScript does meanwhile.
    #[napi]
    pub fn force_release<'env>(
        &self,
        env: &'env Env,
        name: String,
    ) -> Result<PromiseRaw<'env, bool>> {
        let client = self.client.clone();
        let busy = keeper(env)?.busy();
        answer(
            env,
            async move {
                let result = client.force_release(name).await;
                drop(busy);
                result
            },
            |b| b,
        )
    }

    /// A watch of lock `name`'s releases (subscribed when it answers).
    #[napi]
    pub fn releases<'env>(
        &self,
        env: &'env Env,
        name: String,
    ) -> Result<PromiseRaw<'env, Releases>> {
        let client = self.client.clone();
        answer(
            env,
            async move { client.releases(name).await },
            Releases::new,
        )
    }
}

impl Client {
    fn build(
        env: &Env,
        deployment: String,
        urls: Vec<String>,
        master: Option<String>,
        options: Option<ClientOptions>,
    ) -> std::result::Result<Arc<fencelock::Client>, Failure> {
        let deployment = Deployment::new(&deployment, urls, master).map_err(Failure::Config)?;
        let options = match options {
            Some(o) => options_from(o)?,
            None => Options::default(),
        };
        let connection = Connection {
            deployment,
            options,
        };
        let builder = connection.builder().map_err(Failure::Config)?;
        let keeper = keeper(env).map_err(|e| Failure::Config(e.reason.clone()))?;
        // `build` starts the client's background tasks on the runtime it is called in.
        let client = Arc::new(within_runtime_if_available(|| builder.build())?);
        keeper.add_client(&client);
        Ok(client)
    }

    fn context(&self, env: &Env) -> Result<Context> {
        context(env, self.client.clone())
    }
}

fn options_from(o: ClientOptions) -> std::result::Result<Options, Failure> {
    let config = |what: &str, value: Option<f64>| {
        millis_opt("", what, value).map_err(|_| {
            Failure::Config(format!(
                "{what} must be a finite, non-negative number of milliseconds"
            ))
        })
    };
    let pem = |b: Buffer| Pem::Bytes(b.to_vec());
    let tls_client_cert = match (o.tls_cert, o.tls_key) {
        (Some(cert), Some(key)) => Some((pem(cert), pem(key))),
        (None, None) => None,
        _ => return Err(Failure::Config("tls.cert and tls.key go together".into())),
    };
    let replicas = match (o.wait_for_replicas, o.replica_timeout, o.replica_shortfall) {
        (None, None, None) => None,
        (Some(replicas), timeout, shortfall) => Some(Replicas {
            replicas,
            timeout: config("replicaTimeout", timeout)?.unwrap_or(Replicas::DEFAULT_TIMEOUT),
            shortfall: Replicas::shortfall(shortfall.as_deref()).map_err(Failure::Config)?,
        }),
        _ => {
            return Err(Failure::Config(
                "replicaTimeout and replicaShortfall go with waitForReplicas".into(),
            ));
        }
    };
    Ok(Options {
        key_prefix: o.key_prefix,
        command_timeout: config("commandTimeout", o.command_timeout)?,
        instance_timeout: config("instanceTimeout", o.instance_timeout)?,
        tls_ca: o.tls_ca.map(pem),
        tls_client_cert,
        master_username: o.master_username,
        master_password: o.master_password.map(Secret),
        replicas,
    })
}

/// A recipe's `ttl` and `wait` (milliseconds, as JavaScript gives them) as the library takes
/// them; an error names `lock`.
fn lease_and_wait(
    lock: &str,
    ttl: Option<f64>,
    wait: Option<f64>,
) -> std::result::Result<(Option<std::time::Duration>, fencelock::WaitPolicy), Failure> {
    let ttl = millis_opt(lock, "ttl", ttl)?;
    let wait = millis_opt(lock, "wait", wait)?;
    Ok((ttl, fencelock::WaitPolicy::from(wait)))
}
