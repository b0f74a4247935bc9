# Multi-stage build on Debian 12: the build stage compiles and runs the tests,
# the final stage holds only tpud, tpuctl, the default config and the unit's
# runtime layout. Consistent with `cmake --install` (see README "Install").
FROM debian:bookworm AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN bash scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN bash scripts/build.sh \
 && (cd build && ctest --output-on-failure --timeout 600) \
 && cmake --install build --prefix /opt/tpud

FROM debian:bookworm
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      libgrpc++1.51 libprotobuf32 libboost-filesystem1.74.0 libspdlog1.10 libyaml-cpp0.7 \
      libprometheus-cpp-pull1.0 libprometheus-cpp-core1.0 libre2-9 libcurl4 libsqlite3-0 libsystemd0 \
      python3 ca-certificates tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system tpud && useradd --system --gid tpud --home-dir /var/lib/tpud tpud \
 && install -d -o tpud -g tpud /run/tpud /var/lib/tpud /var/log/tpud /etc/tpud/jobs.d
COPY --from=build /opt/tpud/bin/tpud /opt/tpud/bin/tpuctl /opt/tpud/bin/tpud-shim /usr/bin/
COPY --from=build /opt/tpud/etc/tpud/tpud.yaml /etc/tpud/tpud.yaml
COPY --from=build /opt/tpud/share/tpud /usr/share/tpud
USER tpud
ENV TPUD_SOCKET=/run/tpud/tpud.sock
EXPOSE 9464
HEALTHCHECK --interval=30s --timeout=5s CMD ["/usr/bin/tpuctl", "status"]
# tini as PID 1 reaps the job processes that tpud kills after their leader
# exits (on a host, init does that).
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/bin/tpud", "--config", "/etc/tpud/tpud.yaml"]
