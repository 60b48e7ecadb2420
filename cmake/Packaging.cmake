# Packaging.cmake: install rules for the hypervisor-host service (systemd unit, default
# config, man page, copyright) and CPack settings for a Debian package (`cpack -G DEB` in
# the build directory). Included last by the top CMakeLists.txt.
#
# The unit and the config go to absolute paths (/lib/systemd/system, /etc/hvupdater), as a
# Debian 12 package needs them whatever the prefix. CPack and `DESTDIR=... cmake --install`
# stage them; a plain unstaged install as non-root can turn them off:
#   -DHV_INSTALL_SYSTEM_FILES=OFF

option(HV_INSTALL_SYSTEM_FILES
       "Install the systemd unit and /etc/hvupdater/config.json (absolute paths)" ON)
set(HV_SYSTEMD_UNIT_DIR "/lib/systemd/system" CACHE PATH "Where the systemd unit goes")
set(HV_SYSCONF_DIR "/etc/hvupdater" CACHE PATH "Where the default config goes")
set(HV_DEFAULT_DIR "/etc/default" CACHE PATH "Where the unit's environment file goes")
set(HV_PACKAGE_CONTACT "hvupdater maintainers <maintainers@hvupdater.invalid>"
    CACHE STRING "Maintainer field of the Debian package")

set(HV_DEPLOY_DIR ${CMAKE_SOURCE_DIR}/deploy)
set(HV_PKG_DIR ${CMAKE_BINARY_DIR}/packaging)
file(MAKE_DIRECTORY ${HV_PKG_DIR})

# ---- man page: docs/man/hvupdater.1, stamped with this version, gzip -9n (reproducible) ----
set(HV_MAN_SRC ${CMAKE_SOURCE_DIR}/docs/man/hvupdater.1)
if(EXISTS ${HV_MAN_SRC})
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${HV_MAN_SRC})
  file(READ ${HV_MAN_SRC} hv_man)
  string(REGEX REPLACE "\"hvupdater [0-9][0-9.]*\"" "\"hvupdater ${PROJECT_VERSION}\"" hv_man
                       "${hv_man}")
  file(CONFIGURE OUTPUT ${HV_PKG_DIR}/hvupdater.1 CONTENT "${hv_man}" @ONLY)
  find_program(HV_GZIP gzip)
  if(HV_GZIP)
    execute_process(COMMAND ${HV_GZIP} -9 -n -c ${HV_PKG_DIR}/hvupdater.1
                    OUTPUT_FILE ${HV_PKG_DIR}/hvupdater.1.gz RESULT_VARIABLE hv_gz_rc)
    if(NOT hv_gz_rc EQUAL 0)
      message(FATAL_ERROR "gzip of the man page failed: ${hv_gz_rc}")
    endif()
    install(FILES ${HV_PKG_DIR}/hvupdater.1.gz DESTINATION share/man/man1)
  else()
    install(FILES ${HV_PKG_DIR}/hvupdater.1 DESTINATION share/man/man1)
  endif()
endif()

# ---- copyright: Apache-2.0 (LICENSE at the top of the tree), machine-readable (DEP-5) ----
set(HV_PACKAGE_VERSION ${PROJECT_VERSION})
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/LICENSE)
configure_file(${HV_DEPLOY_DIR}/debian/copyright.in ${HV_PKG_DIR}/copyright @ONLY)
install(FILES ${HV_PKG_DIR}/copyright DESTINATION share/doc/hvupdater)

# ---- changelog: a native package's changelog.gz (lintian), version stamped, gzip -9n ----
configure_file(${HV_DEPLOY_DIR}/debian/changelog.in ${HV_PKG_DIR}/changelog @ONLY)
find_program(HV_GZIP_CL gzip REQUIRED)
execute_process(COMMAND ${HV_GZIP_CL} -9 -n -c ${HV_PKG_DIR}/changelog
                OUTPUT_FILE ${HV_PKG_DIR}/changelog.gz RESULT_VARIABLE hv_cl_rc)
if(NOT hv_cl_rc EQUAL 0)
  message(FATAL_ERROR "gzip of the changelog failed: ${hv_cl_rc}")
endif()
install(FILES ${HV_PKG_DIR}/changelog.gz DESTINATION share/doc/hvupdater)

# ---- the host service ----
if(HV_INSTALL_SYSTEM_FILES)
  install(FILES ${HV_DEPLOY_DIR}/systemd/hvupdater.service DESTINATION ${HV_SYSTEMD_UNIT_DIR})
  install(FILES ${HV_DEPLOY_DIR}/systemd/config.json DESTINATION ${HV_SYSCONF_DIR})
  # HVUPDATER_ARGS for the unit's EnvironmentFile=, as Debian's /etc/default/libvirtd
  install(FILES ${HV_DEPLOY_DIR}/systemd/hvupdater.default DESTINATION ${HV_DEFAULT_DIR}
          RENAME hvupdater)
endif()

# ---- CPack: Debian package ----
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME hvupdater)
set(CPACK_PACKAGE_VENDOR hvupdater)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${HV_PACKAGE_CONTACT}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Cluster API in-place update Runtime Extension for vSphere and libvirt/KVM")
set(CPACK_PACKAGE_DESCRIPTION
    "hvupdater serves the Cluster API Runtime SDK hooks CanUpdateMachine,\nCanUpdateMachineSet and UpdateMachine over HTTPS and changes the memory and\nCPU count of VMs in place: hot-plug on libvirt/KVM and hot-add on vSphere,\nelse a graceful power cycle. This package holds the server, a systemd unit\nfor a KVM host (not enabled on install) and its default config.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES TRUE)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Shared-library dependencies come from dpkg-shlibdeps run on the real binary (exact
# packages and minimum versions). Without it (no dpkg-dev), the list the binary links today.
find_program(HV_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(HV_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
else()
  set(CPACK_DEBIAN_PACKAGE_DEPENDS
      "adduser, libc6, libmicrohttpd12, libgnutls30, libyajl2, libcurl4, libxml2, libssl3")
  if(HV_WITH_LIBVIRT)
    string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS ", libvirt0")
  endif()
endif()
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libvirt-daemon-system")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${HV_DEPLOY_DIR}/debian/postinst
    ${HV_DEPLOY_DIR}/debian/prerm ${HV_DEPLOY_DIR}/debian/postrm)
if(HV_INSTALL_SYSTEM_FILES) # config.json and /etc/default/hvupdater: keep the admin's edits
  list(APPEND CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${HV_DEPLOY_DIR}/debian/conffiles)
endif()
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
set(CPACK_SOURCE_IGNORE_FILES "/\\.git/;/build[^/]*/")
include(CPack)
