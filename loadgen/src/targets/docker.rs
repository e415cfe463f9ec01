//! The Docker backend: a fresh, digest-pinned `mysql:8.0` container, pinned to a cpuset,
//! published on loopback only, waited on until healthy, and removed on exit.
//!
//! The image reference lives in `compose/.env` (shared with `compose/docker-compose.yml`);
//! [`container_spec`] is a pure function so the spec is unit-tested without an engine.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bollard::models::{
    ContainerCreateBody, HealthConfig, HealthStatusEnum, HostConfig, PortBinding,
};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, CreateImageOptionsBuilder, InspectContainerOptions,
    RemoveContainerOptionsBuilder, StartContainerOptions,
};
use bollard::Docker;
use futures_util::TryStreamExt;

/// `compose/.env`, embedded at build time: the single pin of the image digest.
const COMPOSE_ENV: &str = include_str!("../../../compose/.env");
/// Root password inside the throwaway container (published on 127.0.0.1 only).
const ROOT_PASSWORD: &str = "bench-root";

/// Server options, the same list as `compose/docker-compose.yml` (a test checks that).
pub const SERVER_ARGS: &[&str] = &[
    "--max-connections=2000",
    "--back-log=2000",
    "--innodb-buffer-pool-size=256M",
    "--max-allowed-packet=64M",
    "--performance-schema=OFF",
    "--skip-name-resolve",
    "--skip-log-bin",
    "--innodb-flush-log-at-trx-commit=2",
    "--mysqlx=OFF",
    "--default-authentication-plugin=mysql_native_password",
];

/// The pinned image, `mysql:8.0@sha256:<64 hex>`, read from `compose/.env`.
pub fn pinned_image() -> Result<String> {
    let image = COMPOSE_ENV
        .lines()
        .find_map(|l| l.trim().strip_prefix("MYSQL_IMAGE="))
        .map(|v| v.trim().trim_matches('"').to_string())
        .context("compose/.env has no MYSQL_IMAGE= line")?;
    let digest = image.split_once("@sha256:").map(|(_, d)| d).unwrap_or("");
    if digest.len() != 64 || !digest.chars().all(|c| c.is_ascii_hexdigit()) {
        bail!("MYSQL_IMAGE {image:?} in compose/.env is not pinned by a sha256 digest");
    }
    Ok(image)
}

/// The container to create: image, env, cpuset, loopback-only port, health check.
pub fn container_spec(image: &str, cpus: &[usize], host_port: u16) -> ContainerCreateBody {
    let cpuset = cpus
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let binding = PortBinding {
        host_ip: Some("127.0.0.1".into()),
        host_port: Some(host_port.to_string()),
    };
    ContainerCreateBody {
        image: Some(image.into()),
        env: Some(vec![
            format!("MYSQL_ROOT_PASSWORD={ROOT_PASSWORD}"),
            "MYSQL_DATABASE=bench".into(),
            "MYSQL_USER=bench".into(),
            "MYSQL_PASSWORD=bench".into(),
        ]),
        cmd: Some(SERVER_ARGS.iter().map(|s| s.to_string()).collect()),
        exposed_ports: Some(vec!["3306/tcp".into()]),
        healthcheck: Some(HealthConfig {
            // Over TCP: the entrypoint's temporary init server listens on no port, so this
            // only passes once the real server is up.
            test: Some(vec![
                "CMD".into(),
                "mysqladmin".into(),
                "ping".into(),
                "-h127.0.0.1".into(),
                "-uroot".into(),
                format!("-p{ROOT_PASSWORD}"),
            ]),
            interval: Some(1_000_000_000),
            timeout: Some(1_000_000_000),
            retries: Some(120),
            ..Default::default()
        }),
        host_config: Some(HostConfig {
            cpuset_cpus: Some(cpuset),
            port_bindings: Some(HashMap::from([(
                "3306/tcp".to_string(),
                Some(vec![binding]),
            )])),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A Docker engine that answers a ping within 3 s, or `None` (no socket, refused, slow).
pub async fn engine() -> Option<Docker> {
    let docker = Docker::connect_with_defaults().ok()?;
    match tokio::time::timeout(Duration::from_secs(3), docker.ping()).await {
        Ok(Ok(_)) => Some(docker),
        _ => None,
    }
}

/// A running container; [`Container::remove`] stops and deletes it.
pub struct Container {
    docker: Docker,
    id: Option<String>,
    /// Host port on 127.0.0.1.
    pub port: u16,
    /// Image reference with digest.
    pub image: String,
}

impl Container {
    /// Pulls the pinned image, creates and starts the container, and waits until healthy.
    pub async fn start(docker: Docker, cpus: &[usize]) -> Result<Container> {
        let image = pinned_image()?;
        docker
            .create_image(
                Some(
                    CreateImageOptionsBuilder::default()
                        .from_image(&image)
                        .build(),
                ),
                None,
                None,
            )
            .try_collect::<Vec<_>>()
            .await
            .with_context(|| format!("pulling {image}"))?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let name = format!("sluice-bench-{}-{port}", std::process::id());
        let id = docker
            .create_container(
                Some(CreateContainerOptionsBuilder::default().name(&name).build()),
                container_spec(&image, cpus, port),
            )
            .await
            .context("creating the MySQL container")?
            .id;
        let mut c = Container {
            docker,
            id: Some(id.clone()),
            port,
            image,
        };
        c.docker
            .start_container(&id, None::<StartContainerOptions>)
            .await
            .context("starting the MySQL container")?;
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let health = c
                .docker
                .inspect_container(&id, None::<InspectContainerOptions>)
                .await?
                .state
                .and_then(|s| s.health)
                .and_then(|h| h.status);
            match health {
                Some(HealthStatusEnum::HEALTHY) => break,
                Some(HealthStatusEnum::UNHEALTHY) => bail!("the MySQL container became unhealthy"),
                _ if Instant::now() > deadline => {
                    bail!("the MySQL container was not healthy after 180 s")
                }
                _ => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
        c.id = Some(id);
        Ok(c)
    }

    /// Stops and removes the container with its volumes.
    pub async fn remove(mut self) -> Result<()> {
        if let Some(id) = self.id.take() {
            self.docker
                .remove_container(
                    &id,
                    Some(
                        RemoveContainerOptionsBuilder::default()
                            .force(true)
                            .v(true)
                            .build(),
                    ),
                )
                .await
                .context("removing the MySQL container")?;
        }
        Ok(())
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        // Reached only on a panic path; remove it from a helper thread with its own runtime.
        if let Some(id) = self.id.take() {
            let docker = self.docker.clone();
            let _ = std::thread::spawn(move || {
                if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    let opts = RemoveContainerOptionsBuilder::default()
                        .force(true)
                        .v(true)
                        .build();
                    let _ = rt.block_on(docker.remove_container(&id, Some(opts)));
                }
            })
            .join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_is_pinned_by_digest_in_compose_env() {
        let image = pinned_image().unwrap();
        assert!(image.starts_with("mysql:8.0@sha256:"), "{image}");
    }

    #[test]
    fn container_spec_pins_cpus_and_publishes_on_loopback_only() {
        let image = pinned_image().unwrap();
        let spec = container_spec(&image, &[0, 2], 3311);
        assert_eq!(spec.image.as_deref(), Some(image.as_str()));
        let host = spec.host_config.expect("host config");
        assert_eq!(host.cpuset_cpus.as_deref(), Some("0,2"));
        let bindings = host.port_bindings.expect("ports");
        let b = bindings["3306/tcp"].as_ref().expect("binding");
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].host_ip.as_deref(), Some("127.0.0.1"));
        assert_eq!(b[0].host_port.as_deref(), Some("3311"));
        let env = spec.env.expect("env");
        for want in [
            "MYSQL_DATABASE=bench",
            "MYSQL_USER=bench",
            "MYSQL_PASSWORD=bench",
        ] {
            assert!(env.iter().any(|e| e == want), "{want} missing from {env:?}");
        }
        assert!(env.iter().any(|e| e.starts_with("MYSQL_ROOT_PASSWORD=")));
        let cmd = spec.cmd.expect("cmd");
        assert!(cmd.iter().any(|a| a == "--max-connections=2000"));
        assert!(cmd.iter().any(|a| a == "--performance-schema=OFF"));
        assert!(spec.healthcheck.and_then(|h| h.test).is_some());
    }

    #[test]
    fn compose_file_runs_the_same_server() {
        let compose = include_str!("../../../compose/docker-compose.yml");
        assert!(compose.contains("image: ${MYSQL_IMAGE}"));
        assert!(compose.contains("127.0.0.1:"));
        for arg in SERVER_ARGS {
            assert!(compose.contains(arg), "compose is missing {arg}");
        }
    }

    #[tokio::test]
    async fn no_engine_means_fallback() {
        // Point the client at a port where nothing listens: ping fails, engine() is None.
        std::env::set_var("DOCKER_HOST", "tcp://127.0.0.1:1");
        assert!(engine().await.is_none());
        std::env::set_var("DOCKER_HOST", "unix:///nonexistent/docker.sock");
        assert!(engine().await.is_none());
        std::env::remove_var("DOCKER_HOST");
    }
}
