# What `cmake --install` puts where, and the Debian package cpack makes of it:
#
#   cmake --build --preset release --target dockgate-proxy dockgate-sidecar dockgate-mount
#   (cd build/release && cpack -G DEB)      -> build/release/dockgate_<version>_amd64.deb
#
# /usr/bin: the three programs. /etc/dockgate: the example policies (conffiles).
# /etc/default: the services' settings. /lib/systemd/system: the units (packaging/systemd).
install(TARGETS dockgate-proxy dockgate-sidecar dockgate-mount RUNTIME DESTINATION bin)
file(GLOB DOCKGATE_POLICIES "${PROJECT_SOURCE_DIR}/compose/policies/*.json")
install(FILES ${DOCKGATE_POLICIES} DESTINATION /etc/dockgate)
install(FILES packaging/default/dockgate-proxy packaging/default/dockgate-sidecar DESTINATION /etc/default)
install(FILES packaging/systemd/dockgate-proxy.socket packaging/systemd/dockgate-proxy.service
              packaging/systemd/dockgate-sidecar.service DESTINATION /lib/systemd/system)
install(FILES README.md DESTINATION share/doc/dockgate)
install(DIRECTORY docs/ DESTINATION share/doc/dockgate/docs PATTERN "docker-api" EXCLUDE)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME dockgate)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Docker socket gate, sandbox sidecar and FUSE workspace mounts")
set(CPACK_PACKAGE_DESCRIPTION
    "dockgate-proxy stands in front of the Docker engine socket: every request is routed to an\n\
Engine API operation, checked against a policy and rewritten. dockgate-sidecar runs sandbox\n\
sessions through it; dockgate-mount mounts per-session workspaces from object storage.")
set(CPACK_PACKAGE_CONTACT "dockgate maintainers <dockgate@localhost>")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # dockgate_<version>_amd64.deb
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # the libraries the programs load, from dpkg-shlibdeps
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "docker.io")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "fuse3, s3fs")
set(CPACK_STRIP_FILES ON)
# The example policies and settings are the operator's to edit: kept on upgrade.
file(WRITE "${CMAKE_BINARY_DIR}/packaging/conffiles" "")
foreach(policy ${DOCKGATE_POLICIES})
  get_filename_component(name ${policy} NAME)
  file(APPEND "${CMAKE_BINARY_DIR}/packaging/conffiles" "/etc/dockgate/${name}\n")
endforeach()
file(APPEND "${CMAKE_BINARY_DIR}/packaging/conffiles" "/etc/default/dockgate-proxy\n/etc/default/dockgate-sidecar\n")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${CMAKE_BINARY_DIR}/packaging/conffiles;${PROJECT_SOURCE_DIR}/packaging/debian/postinst;${PROJECT_SOURCE_DIR}/packaging/debian/prerm;${PROJECT_SOURCE_DIR}/packaging/debian/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
