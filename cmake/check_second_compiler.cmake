# ctest second_compiler (cmake -P): configures smelt with another compiler
# (CXX, e.g. clang++) in syntax-only mode with warnings as errors and builds
# every target: each translation unit of the library, tools, tests, benchmarks,
# examples and the public-header checks is parsed and type-checked, nothing is
# generated. Inputs: SOURCE_DIR, WORK (its build directory), CXX, GENERATOR.
cmake_minimum_required(VERSION 3.22)
include(ProcessorCount)
ProcessorCount(jobs)
if(jobs EQUAL 0)
  set(jobs 2)
endif()

execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK} -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX}
          -DSMELT_SYNTAX_ONLY=ON -DSMELT_WERROR=ON -DSMELT_CHECK_CXX=
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring with ${CXX} failed:\n${out}")
endif()
# Keep going after an error, so that one run reports every rejected source.
if(GENERATOR STREQUAL "Ninja")
  set(keep_going -- -k 0)
elseif(GENERATOR MATCHES "Makefiles")
  set(keep_going -- -k)
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK} -j ${jobs} ${keep_going} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${CXX} rejects the sources above")
endif()
