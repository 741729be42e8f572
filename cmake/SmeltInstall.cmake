# Install rules: libsmelt, the public headers, the `smelt` tool, the CMake
# package (find_package(smelt) gives smelt::smelt with its dependencies) and a
# pkg-config file. Included by the top-level CMakeLists.txt when SMELT_INSTALL.
include(CMakePackageConfigHelpers)

set(SMELT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/smelt)

install(TARGETS smelt_lib EXPORT smeltTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/smelt DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
if(TARGET smelt_cli)
  install(TARGETS smelt_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# The model fetcher smelt::nn::fetch_pretrained runs once installed.
install(FILES ${PROJECT_SOURCE_DIR}/tools/fetch_model.py DESTINATION ${CMAKE_INSTALL_DATADIR}/smelt)
install(EXPORT smeltTargets NAMESPACE smelt:: DESTINATION ${SMELT_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/smeltConfig.cmake.in
  ${PROJECT_BINARY_DIR}/smeltConfig.cmake INSTALL_DESTINATION ${SMELT_CMAKE_DIR})
# 0.x: a new minor version may break the API, so only the same minor matches.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/smeltConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/smeltConfig.cmake ${PROJECT_BINARY_DIR}/smeltConfigVersion.cmake
  DESTINATION ${SMELT_CMAKE_DIR})

# pkg-config. The file is relocatable: its prefix is found from its own place
# (${pcfiledir}), so `cmake --install --prefix DIR` and moved trees work.
set(SMELT_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(SMELT_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(SMELT_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
  set(SMELT_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
  file(RELATIVE_PATH SMELT_PC_UP /prefix/${SMELT_PC_DIR} /prefix)  # "../.."
  string(REGEX REPLACE "/$" "" SMELT_PC_UP "${SMELT_PC_UP}")
  set(SMELT_PC_PREFIX "\${pcfiledir}/${SMELT_PC_UP}")
  set(SMELT_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(SMELT_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
if(SMELT_BUILD_SHARED)
  set(SMELT_PC_LIBS_PRIVATE "")
else()
  list(JOIN BLAS_LIBRARIES " " SMELT_PC_BLAS)
  set(SMELT_PC_LIBS_PRIVATE "Libs.private: ${OpenMP_CXX_FLAGS} -ldnnl -licuuc -lsleef ${SMELT_PC_BLAS}")
  foreach(lib ${CMAKE_DL_LIBS})
    string(APPEND SMELT_PC_LIBS_PRIVATE " -l${lib}")
  endforeach()
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/smelt.pc.in ${PROJECT_BINARY_DIR}/smelt.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/smelt.pc DESTINATION ${SMELT_PC_DIR})
