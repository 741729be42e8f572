# The CUDA backend's build switch (included by the top-level CMakeLists.txt
# before the library is defined). SMELT_CUDA is AUTO, ON or OFF:
#   AUTO  builds the CUDA backend when a CUDA compiler and toolkit are found;
#   ON    requires them; OFF never builds it.
# Sets SMELT_WITH_CUDA (ON/OFF). With CUDA, the kernels are compiled ahead of
# time for SMELT_CUDA_ARCHITECTURES (CMAKE_CUDA_ARCHITECTURES' syntax; by
# default SASS for sm_80 and sm_90 plus compute_90 PTX, which newer GPUs
# compile at load time). Each architecture is another pass of nvcc's device
# compiler over every kernel: `make test` builds one (see the Makefile). nvcc
# goes through ccache when it is installed. A machine with the toolkit and no
# GPU builds everything: the backend reports no device at run time and the
# CUDA tests skip themselves.
set(SMELT_CUDA AUTO CACHE STRING "Build the CUDA backend: AUTO (when the toolkit is found), ON or OFF")
set_property(CACHE SMELT_CUDA PROPERTY STRINGS AUTO ON OFF)
# Declared in every configuration (`make test` passes it, with or without CUDA).
# A CMAKE_CUDA_ARCHITECTURES given at the first configure is the default.
set(default_archs "80-real;90-real;90-virtual")
if(DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(default_archs "${CMAKE_CUDA_ARCHITECTURES}")
endif()
set(SMELT_CUDA_ARCHITECTURES "${default_archs}" CACHE STRING
    "GPU architectures of the CUDA kernels (CMAKE_CUDA_ARCHITECTURES syntax, e.g. 90-real, native)")

set(SMELT_WITH_CUDA OFF)
if(SMELT_SYNTAX_ONLY)
  # Syntax-only checks parse the backend's host code (no nvcc): the toolkit's headers suffice.
  if(SMELT_CUDA)
    find_package(CUDAToolkit QUIET)
    set(SMELT_WITH_CUDA ${CUDAToolkit_FOUND})
  endif()
elseif(SMELT_CUDA STREQUAL "AUTO")
  include(CheckLanguage)
  check_language(CUDA)
  find_package(CUDAToolkit QUIET)
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND)
    set(SMELT_WITH_CUDA ON)
  endif()
elseif(SMELT_CUDA)
  set(SMELT_WITH_CUDA ON)
endif()

if(SMELT_WITH_CUDA AND NOT SMELT_SYNTAX_ONLY)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES ${SMELT_CUDA_ARCHITECTURES})
  endif()
  if(NOT DEFINED CMAKE_CUDA_HOST_COMPILER AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    set(CMAKE_CUDA_HOST_COMPILER ${CMAKE_CXX_COMPILER})
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  # CMake before 3.26 does not know nvcc's c++20 flag: tell it.
  if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  if(NOT CMAKE_CUDA_FLAGS_RELEASE MATCHES "-O")
    set(CMAKE_CUDA_FLAGS_RELEASE "-O3")
  endif()
  find_program(CCACHE_PROGRAM ccache)
  if(CCACHE_PROGRAM AND NOT CMAKE_CUDA_COMPILER_LAUNCHER)
    set(CMAKE_CUDA_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
  endif()
  message(STATUS "smelt: CUDA backend ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
                 "architectures ${SMELT_CUDA_ARCHITECTURES})")
elseif(SMELT_WITH_CUDA)
  message(STATUS "smelt: CUDA backend's host code checked (syntax only)")
else()
  message(STATUS "smelt: CUDA backend OFF (SMELT_CUDA=${SMELT_CUDA})")
endif()
