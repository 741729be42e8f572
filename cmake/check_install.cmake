# ctest install_consumer (cmake -P): installs the build into a fresh prefix and
# builds and runs examples/consumer against it, once through find_package(smelt)
# and once through pkg-config; also runs the installed `smelt --version` and
# configures the consumer with add_subdirectory(smelt).
# Inputs: BUILD_DIR, SOURCE_DIR, WORK (scratch directory), GENERATOR, CXX.
cmake_minimum_required(VERSION 3.22)

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${ARGN}\n${out}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

function(expect_consumer_output exe)
  run("running ${exe}" ${CMAKE_COMMAND} -E env SMELT_CACHE_DIR=${WORK}/kernel-cache
      OMP_NUM_THREADS=1 ${exe})
  if(NOT out MATCHES "compiled == eager: yes\nkernel: cpp_poi_fused_[a-z_]*sigmoid_0\n")
    message(FATAL_ERROR "${exe}: unexpected output:\n${out}")
  endif()
  message(STATUS "${exe}:\n${out}")
endfunction()

set(prefix ${WORK}/prefix)
set(consumer ${SOURCE_DIR}/examples/consumer)
file(REMOVE_RECURSE ${WORK})
run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

run("installed smelt --version" ${prefix}/bin/smelt --version)
if(NOT out MATCHES "^smelt [0-9]+\\.[0-9]+\\.[0-9]+")
  message(FATAL_ERROR "installed smelt --version printed: ${out}")
endif()

# find_package(smelt)
run("configuring the consumer" ${CMAKE_COMMAND} -S ${consumer} -B ${WORK}/build -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix})
run("building the consumer" ${CMAKE_COMMAND} --build ${WORK}/build)
expect_consumer_output(${WORK}/build/consumer)

# pkg-config
find_program(PKG_CONFIG pkg-config REQUIRED)
file(GLOB pc_dir LIST_DIRECTORIES true ${prefix}/lib*/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "${pc_dir}")
file(GLOB shared_lib ${prefix}/lib*/libsmelt.so)
if(shared_lib)
  run("pkg-config" ${PKG_CONFIG} --cflags --libs smelt)
else()
  run("pkg-config" ${PKG_CONFIG} --static --cflags --libs smelt)
endif()
separate_arguments(pc_flags UNIX_COMMAND "${out}")
run("pkg-config --variable=libdir" ${PKG_CONFIG} --variable=libdir smelt)
string(STRIP "${out}" libdir)
run("building the consumer with pkg-config" ${CXX} -std=c++20 ${consumer}/main.cpp ${pc_flags}
    -Wl,-rpath,${libdir} -o ${WORK}/consumer_pkgconfig)
expect_consumer_output(${WORK}/consumer_pkgconfig)

# add_subdirectory: configured only (building would compile the library again);
# the consumer's CMakeLists fails if smelt's tests or benchmarks are defined.
run("configuring the consumer with add_subdirectory" ${CMAKE_COMMAND} -S ${consumer}
    -B ${WORK}/subdirectory -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX} -DSMELT_SOURCE=${SOURCE_DIR})
