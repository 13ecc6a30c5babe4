# Cross-compiles for 64-bit Arm Linux with Debian's g++-aarch64-linux-gnu; the
# results run here under qemu-user (`qemu-aarch64 -L /usr/aarch64-linux-gnu`).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
