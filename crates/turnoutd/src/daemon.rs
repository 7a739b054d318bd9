//! The daemon's state and the control API's dispatcher: a running
//! [`fabric::Switch`], the ports attached to it, the running config, and
//! [`Daemon::handle_line`] answering one JSON-RPC request line.
//!
//! Threading: every control operation takes the daemon's state lock, so
//! calls from several clients are serialised; the workers never take it.
//! Port and logic changes reach the data path through the switch's atomic
//! snapshot swaps, between batches. Every argument is validated before
//! anything changes; a failed call leaves ports and logic as they were.

use std::sync::Arc;
use std::time::Instant;

use fabric::{Port, PortId, Switch, SwitchError};
use logic::flows::Flows;
use logic::{Built, Services};
use parking_lot::Mutex;
use serde_json::{json, Value};

use crate::api::{self, code, ApiError, Call};
use crate::config::{self, Config, ConfigError, LogicConfig, PortConfig};
use crate::logics::{self, BuildError, LogicFactory};

/// Git commit the binary was built from.
pub const GIT: &str = match option_env!("TURNOUT_GIT") {
    Some(g) => g,
    None => "unknown",
};

/// Why the daemon could not start.
#[derive(Debug)]
pub enum StartError {
    /// The configuration is invalid (exit code 2).
    Config(ConfigError),
    /// A port or the switch could not be set up (exit code 1).
    Runtime(String),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Config(e) => write!(f, "{e}"),
            StartError::Runtime(m) => f.write_str(m),
        }
    }
}

struct Attached {
    id: PortId,
    name: String,
    /// The `[[ports]]` table it came from, as JSON (for `config.show`).
    config: Value,
    port: Arc<dyn Port>,
}

/// A logic parked by [`Daemon::park_logic`], with its services.
pub struct ParkedLogic {
    logic: fabric::switch::ParkedLogic,
    services: Services,
}

impl ParkedLogic {
    /// Name of the parked logic.
    pub fn name(&self) -> &'static str {
        self.logic.name()
    }
}

struct State {
    config: Config,
    ports: Vec<Attached>,
}

/// A running turnoutd: switch, ports, logic and the control dispatcher.
pub struct Daemon {
    switch: Switch,
    backends: crate::backends::Backends,
    factory: Arc<dyn LogicFactory>,
    state: Mutex<State>,
    /// What the logic table built with the running logic for the control
    /// plane (its OpenFlow tables): changed with the logic, under `swap`.
    services: Mutex<Services>,
    /// Serialises logic swaps (`logic.replace`, fail-standalone's park and
    /// restore), so that `services` always belongs to the running logic.
    swap: Mutex<()>,
    started: Instant,
    /// Datapath id and refusal counters of the OpenFlow channel.
    openflow: crate::openflow::switch::OfSwitch,
    /// CPUs held in polling idle (`[[workers]] cpu_idle = "poll"`), released
    /// at shutdown.
    _idle: Vec<crate::sys::CpuIdlePoll>,
}

/// Builds logic `cfg` with port names looked up by `lookup`.
fn build_logic(
    factory: &dyn LogicFactory,
    cfg: &LogicConfig,
    lookup: &dyn Fn(&str) -> Option<PortId>,
) -> Result<Built, BuildError> {
    let params = if cfg.params.is_empty() {
        Value::Null
    } else {
        Value::Object(cfg.params.clone())
    };
    let params = logics::resolve_ports(&params, logics::port_keys(&cfg.name), lookup, "logic")
        .map_err(BuildError::Refused)?;
    factory.build(&cfg.name, &params)
}

/// Checks a config as `--check-config` does: parse-level validity, built-in
/// backends, and that the logic accepts its table (ports get the ids they
/// would get at start-up: their order in the file).
pub fn check_config(cfg: &Config, factory: &dyn LogicFactory) -> Result<(), ConfigError> {
    cfg.check_backends()?;
    let lookup = |n: &str| {
        cfg.ports
            .iter()
            .position(|p| p.name == n)
            .map(|i| i as PortId)
    };
    build_logic(factory, &cfg.logic, &lookup).map_err(logic_config_error)?;
    Ok(())
}

/// A logic build failure at start-up as a config error: name resolution
/// errors carry their own key path (`logic.pairs[0][1]`).
fn logic_config_error(e: BuildError) -> ConfigError {
    let m = e.to_string();
    if m.starts_with("logic.") {
        ConfigError::new("", m)
    } else {
        ConfigError::new("logic", m)
    }
}

impl Daemon {
    /// Starts the switch and opens every configured port.
    pub fn start(cfg: Config, factory: Arc<dyn LogicFactory>) -> Result<Daemon, StartError> {
        cfg.check_backends().map_err(StartError::Config)?;
        // Ports get ids 0, 1, … in file order (the table hands out the lowest
        // free id); the logic is built against those ids before the switch
        // starts, and rebuilt below in the unlikely case they differ.
        let lookup = |n: &str| {
            cfg.ports
                .iter()
                .position(|p| p.name == n)
                .map(|i| i as PortId)
        };
        let logic = build_logic(factory.as_ref(), &cfg.logic, &lookup)
            .map_err(|e| StartError::Config(logic_config_error(e)))?;
        let mut idle = Vec::new();
        for (i, w) in cfg.workers.iter().enumerate() {
            if let (Some(crate::config::CpuIdle::Poll), Some(cpu)) = (w.cpu_idle, w.cpu) {
                let g = crate::sys::CpuIdlePoll::hold(cpu).map_err(|e| {
                    StartError::Runtime(format!("workers[{i}].cpu_idle: cpu {cpu}: {e}"))
                })?;
                idle.push(g);
            }
        }
        let switch = Switch::new(cfg.switch_config(), logic.logic)
            .map_err(|e| StartError::Runtime(e.to_string()))?;
        let d = Daemon {
            _idle: idle,
            switch,
            backends: crate::backends::Backends::new(cfg.switch.latency_budget()),
            factory,
            state: Mutex::new(State {
                config: Config {
                    ports: Vec::new(),
                    ..cfg.clone()
                },
                ports: Vec::new(),
            }),
            services: Mutex::new(logic.services),
            swap: Mutex::new(()),
            started: Instant::now(),
            openflow: crate::openflow::switch::OfSwitch::new(
                cfg.switch.datapath_id.unwrap_or_else(|| {
                    crate::openflow::switch::derived_datapath_id(&cfg.switch.control_socket)
                }),
            ),
        };
        let mut moved = false;
        for (i, pc) in cfg.ports.iter().enumerate() {
            let port = d
                .backends
                .open(pc)
                .map_err(|e| StartError::Runtime(format!("port {}: {e}", pc.name)))?;
            let id = d
                .attach(
                    pc.name.clone(),
                    port,
                    pc.worker,
                    pc.to_json(),
                    Some(pc.clone()),
                )
                .map_err(|e| StartError::Runtime(format!("port {}: {}", pc.name, e.message)))?;
            moved |= id as usize != i;
            crate::log!(
                crate::log::Level::Info,
                "port",
                "port added",
                name = pc.name,
                kind = pc.spec.kind(),
                id = id
            );
        }
        if moved {
            let st = d.state.lock();
            let lookup = |n: &str| st.ports.iter().find(|p| p.name == n).map(|p| p.id);
            let logic = build_logic(d.factory.as_ref(), &st.config.logic, &lookup)
                .map_err(|e| StartError::Config(logic_config_error(e)))?;
            d.install(logic)
                .map_err(|e| StartError::Runtime(e.to_string()))?;
        }
        Ok(d)
    }

    /// Time since start.
    pub fn uptime(&self) -> std::time::Duration {
        self.started.elapsed()
    }

    /// Path of the control socket (as configured).
    pub fn control_socket(&self) -> std::path::PathBuf {
        self.state.lock().config.switch.control_socket.clone()
    }

    /// The OpenFlow channel's switch-wide state (datapath id, refusals).
    pub fn openflow(&self) -> &crate::openflow::switch::OfSwitch {
        &self.openflow
    }

    /// The switch (for tests and the metrics endpoint). Logic swaps go
    /// through the daemon ([`Daemon::park_logic`], `logic.replace`), which
    /// keeps [`Daemon::openflow_tables`] with the running logic.
    pub fn switch(&self) -> &Switch {
        &self.switch
    }

    /// The running logic's OpenFlow tables, when its entry in the logic
    /// table offers them ([`logic::Services::openflow`]): what the OpenFlow
    /// agent (crate::openflow) and the flow timer work on. None with any
    /// other logic, and while fail-standalone's bridge stands in.
    pub fn openflow_tables(&self) -> Option<Arc<Flows>> {
        self.services.lock().openflow.clone()
    }

    /// Runs `b` in place of the running logic, its services with it. On a
    /// worker sync timeout the logic is installed all the same.
    fn install(&self, b: Built) -> Result<(), SwitchError> {
        let _swap = self.swap.lock();
        let synced = self.switch.replace_logic(b.logic);
        *self.services.lock() = b.services;
        synced
    }

    /// Parks the running logic, its services with it, behind `stand_in`
    /// (fail-standalone's bridge: it offers no services);
    /// [`fabric::Switch::park_logic`].
    pub fn park_logic(
        &self,
        stand_in: Box<dyn fabric::Logic>,
    ) -> (ParkedLogic, Result<(), SwitchError>) {
        let _swap = self.swap.lock();
        let (logic, synced) = self.switch.park_logic(stand_in);
        let services = std::mem::take(&mut *self.services.lock());
        (ParkedLogic { logic, services }, synced)
    }

    /// Puts back what [`Daemon::park_logic`] parked, services included,
    /// if the stand-in still runs ([`fabric::Switch::restore_logic`]).
    pub fn restore_logic(&self, p: ParkedLogic) -> Result<bool, SwitchError> {
        let _swap = self.swap.lock();
        let r = self.switch.restore_logic(p.logic);
        // Err: restored, but a worker was late to take it.
        if !matches!(r, Ok(false)) {
            *self.services.lock() = p.services;
        }
        r
    }

    /// Attaches an already opened port (in-process ports in tests, and the
    /// second half of `port.add`). `config` is what `config.show` lists.
    pub fn attach(
        &self,
        name: String,
        port: Arc<dyn Port>,
        worker: Option<usize>,
        config: Value,
        pc: Option<PortConfig>,
    ) -> Result<PortId, ApiError> {
        self.attach_locked(&mut self.state.lock(), name, port, worker, config, pc)
    }

    fn attach_locked(
        &self,
        st: &mut State,
        name: String,
        port: Arc<dyn Port>,
        worker: Option<usize>,
        config: Value,
        pc: Option<PortConfig>,
    ) -> Result<PortId, ApiError> {
        let id = self
            .switch
            .add_port(&name, port.clone(), worker)
            .map_err(switch_error)?;
        if let Some(pc) = pc {
            st.config.ports.push(pc);
        }
        st.ports.push(Attached {
            id,
            name,
            config,
            port,
        });
        Ok(id)
    }

    /// Stops the workers and closes every port.
    pub fn shutdown(self) {
        let Daemon {
            switch,
            state,
            backends,
            _idle,
            ..
        } = self;
        let names: Vec<String> = state.lock().ports.iter().map(|p| p.name.clone()).collect();
        for n in names {
            let _ = switch.remove_port(&n);
        }
        switch.shutdown();
        drop(state);
        backends.close_all();
        drop(_idle);
    }

    /// Answers one request line; `None` for a notification.
    pub fn handle_line(&self, line: &[u8]) -> Option<String> {
        let req = match api::parse_request(line) {
            Ok(r) => r,
            Err((id, e)) => return Some(api::response_err(&id, &e)),
        };
        let result = Call::parse(&req.method, req.params).and_then(|c| self.call(c));
        if let Err(e) = &result {
            crate::log!(
                crate::log::Level::Debug,
                "ctl",
                "request failed",
                method = req.method,
                code = e.code,
                error = e.message
            );
        } else {
            crate::log!(
                crate::log::Level::Debug,
                "ctl",
                "request done",
                method = req.method
            );
        }
        let id = req.id?;
        Some(match result {
            Ok(v) => api::response_ok(&id, v),
            Err(e) => api::response_err(&id, &e),
        })
    }

    /// Runs one typed call.
    pub fn call(&self, call: Call) -> Result<Value, ApiError> {
        match call {
            Call::Version => Ok(to_value(api::VersionResult {
                version: env!("CARGO_PKG_VERSION").to_string(),
                api: api::API_VERSION,
                git: GIT.to_string(),
            })),
            Call::ConfigShow => {
                let st = self.state.lock();
                let mut v = st.config.to_json();
                v["ports"] = Value::Array(st.ports.iter().map(|p| p.config.clone()).collect());
                Ok(v)
            }
            Call::PortList => {
                let st = self.state.lock();
                let mut out: Vec<api::PortListEntry> = st
                    .ports
                    .iter()
                    .map(|p| {
                        let info = p.port.info();
                        api::PortListEntry {
                            id: p.id,
                            name: p.name.clone(),
                            kind: info.kind.to_string(),
                            queues: info.queues,
                            link_up: p.port.link_up(),
                            worker: self.switch.port_worker(p.id),
                            max_frame_b: info.max_frame_b,
                        }
                    })
                    .collect();
                out.sort_by_key(|p| p.id);
                Ok(to_value(out))
            }
            Call::PortAdd(v) => self.port_add(&v),
            Call::PortRemove(p) => {
                let mut st = self.state.lock();
                let i = st
                    .ports
                    .iter()
                    .position(|a| a.name == p.name)
                    .ok_or_else(|| {
                        ApiError::new(code::NOT_FOUND, format!("no port named {:?}", p.name))
                    })?;
                // On a timeout the port is out of the switch's table all the
                // same: forget it here too, then answer the error.
                let removed = self.switch.remove_port(&p.name);
                let a = st.ports.remove(i);
                let pc = st
                    .config
                    .ports
                    .iter()
                    .position(|c| c.name == p.name)
                    .map(|j| st.config.ports.remove(j));
                drop(a);
                if let Some(pc) = pc {
                    self.backends.closed(&pc);
                }
                drop(st);
                crate::log!(
                    crate::log::Level::Info,
                    "port",
                    "port removed",
                    name = p.name
                );
                removed.map_err(switch_error)?;
                Ok(json!({}))
            }
            Call::LogicShow => {
                let st = self.state.lock();
                let (name, commands) = self.switch.with_logic(|l| {
                    (
                        l.name().to_string(),
                        l.commands()
                            .iter()
                            .map(|(c, h)| (c.to_string(), h.to_string()))
                            .collect(),
                    )
                });
                Ok(to_value(api::LogicShowResult {
                    name,
                    commands,
                    config: st.config.logic.to_json(),
                }))
            }
            Call::LogicReplace(v) => {
                let cfg =
                    LogicConfig::from_json(&v, "").map_err(|e| ApiError::params(api_msg(&e)))?;
                let mut st = self.state.lock();
                let lookup = |n: &str| st.ports.iter().find(|p| p.name == n).map(|p| p.id);
                let logic =
                    build_logic(self.factory.as_ref(), &cfg, &lookup).map_err(|e| match e {
                        BuildError::Unknown(m) => ApiError::params(m),
                        BuildError::Refused(m) => ApiError::new(code::REFUSED, m),
                    })?;
                let name = logic.logic.name().to_string();
                // On a timeout the new logic is installed all the same (a
                // late worker takes it at its next batch): record it, then
                // answer the error.
                let synced = self.install(logic);
                crate::log!(
                    crate::log::Level::Info,
                    "logic",
                    "logic replaced",
                    name = name
                );
                st.config.logic = cfg;
                synced.map_err(switch_error)?;
                Ok(to_value(api::LogicReplaceResult { name }))
            }
            Call::LogicCommand(p) => {
                let st = self.state.lock();
                let lookup = |n: &str| st.ports.iter().find(|a| a.name == n).map(|a| a.id);
                self.switch.with_logic(|l| {
                    let mut args = logics::resolve_ports(
                        &p.args,
                        logics::port_keys(l.name()),
                        &lookup,
                        "args",
                    )
                    .map_err(ApiError::params)?;
                    // Commands the logic table marks get the switch's port
                    // ids (`flows trace` expands a flood and tells missing
                    // ports with them, docs/flows.md).
                    if logics::port_ids_for(l.name()).contains(&p.cmd.as_str()) {
                        if let Some(o) = args.as_object_mut() {
                            let ids: Vec<u16> = st.ports.iter().map(|a| a.id).collect();
                            o.entry("ports").or_insert_with(|| ids.into());
                        }
                    }
                    if !l.commands().iter().any(|(c, _)| *c == p.cmd) {
                        let names: Vec<&str> = l.commands().iter().map(|(c, _)| *c).collect();
                        return Err(ApiError::params(format!(
                            "logic {} has no command {:?} (commands: {})",
                            l.name(),
                            p.cmd,
                            if names.is_empty() {
                                "none".to_string()
                            } else {
                                names.join(", ")
                            }
                        )));
                    }
                    l.command(&p.cmd, &args)
                        .map_err(|e| ApiError::new(code::REFUSED, e.0))
                })
            }
            Call::TunnelShow(p) => {
                let t = self.backends.tunnel(&p.name).ok_or_else(|| {
                    ApiError::new(
                        code::NOT_FOUND,
                        format!("no vxlan or geneve port named {:?}", p.name),
                    )
                })?;
                Ok(to_value(api::TunnelShowResult {
                    name: p.name.clone(),
                    kind: t.info().kind.to_string(),
                    remotes: t
                        .remotes()
                        .into_iter()
                        .map(|(ip, resolved, learned)| api::TunnelRemote {
                            ip: ip.to_string(),
                            resolved,
                            learned,
                        })
                        .collect(),
                    macs: t
                        .macs()
                        .into_iter()
                        .map(|(mac, ip, age_s)| api::TunnelMac {
                            mac: mac.to_string(),
                            remote: ip.to_string(),
                            age_s,
                        })
                        .collect(),
                }))
            }
            Call::Stats => Ok(to_value(self.stats())),
            Call::StatsReset => {
                let _st = self.state.lock();
                self.switch.reset_stats();
                self.openflow.reset();
                Ok(json!({}))
            }
            Call::SwitchShow => Ok(self.switch_show(&self.state.lock())),
            Call::SwitchSet(p) => {
                let d = crate::openflow::switch::parse_datapath_id(&p.datapath_id)
                    .map_err(|m| ApiError::params(format!("switch.set: datapath_id: {m}")))?;
                let mut st = self.state.lock();
                st.config.switch.datapath_id = Some(d);
                if self.openflow.set_datapath_id(d) {
                    crate::log!(
                        crate::log::Level::Info,
                        "openflow",
                        "datapath id changed; OpenFlow connections end so that controllers \
                         reconnect and read it",
                        datapath_id = crate::openflow::switch::format_datapath_id(d)
                    );
                }
                Ok(self.switch_show(&st))
            }
        }
    }

    fn switch_show(&self, st: &State) -> Value {
        to_value(api::SwitchShowResult {
            datapath_id: crate::openflow::switch::format_datapath_id(self.openflow.datapath_id()),
            datapath_id_configured: st.config.switch.datapath_id.is_some(),
        })
    }

    fn port_add(&self, v: &Value) -> Result<Value, ApiError> {
        let workers = self.switch.config().workers.len();
        let pc =
            PortConfig::from_json(v, "", workers).map_err(|e| ApiError::params(api_msg(&e)))?;
        // The state lock is held from the checks to the attach, so two
        // clients cannot add the same name or resource at once.
        let mut st = self.state.lock();
        if st.ports.iter().any(|a| a.name == pc.name) {
            return Err(ApiError::new(
                code::ALREADY_EXISTS,
                format!("a port named {:?} exists", pc.name),
            ));
        }
        config::check_conflicts(
            &pc,
            "",
            st.config.ports.iter().map(|c| (c.name.as_str(), c)),
        )
        .map_err(|e| ApiError::new(code::ALREADY_EXISTS, api_msg(&e)))?;
        if !crate::backends::available(pc.spec.kind()) {
            return Err(ApiError::new(
                code::BACKEND,
                crate::backends::unavailable_message(pc.spec.kind()),
            ));
        }
        let port = self
            .backends
            .open(&pc)
            .map_err(|e| ApiError::new(code::BACKEND, e))?;
        let id = self.attach_locked(
            &mut st,
            pc.name.clone(),
            port,
            pc.worker,
            pc.to_json(),
            Some(pc.clone()),
        )?;
        drop(st);
        crate::log!(
            crate::log::Level::Info,
            "port",
            "port added",
            name = pc.name,
            kind = pc.spec.kind(),
            id = id
        );
        Ok(to_value(api::PortAddResult { id }))
    }

    /// A snapshot of every counter (the `stats` call and the metrics).
    pub fn stats(&self) -> api::StatsResult {
        api::StatsResult::collect(&self.switch, self.started, &self.openflow)
    }
}

fn to_value<T: serde::Serialize>(v: T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn api_msg(e: &ConfigError) -> String {
    if e.path.is_empty() {
        e.message.clone()
    } else {
        format!("{}: {}", e.path, e.message)
    }
}

fn switch_error(e: SwitchError) -> ApiError {
    let c = match &e {
        SwitchError::NoSuchPort(_) => code::NOT_FOUND,
        SwitchError::DuplicatePort(_) => code::ALREADY_EXISTS,
        SwitchError::BadConfig(_) | SwitchError::NoSuchWorker(_) => code::INVALID_PARAMS,
        SwitchError::TableFull => code::REFUSED,
        SwitchError::Os(_) | SwitchError::Timeout(_) => code::BACKEND,
    };
    ApiError::new(c, e.to_string())
}
