# CPack pre-build script (CPACK_PRE_BUILD_SCRIPTS): turns the staged install
# tree (CPACK_TEMPORARY_DIRECTORY, the package's /) into the Debian layout
# before the .deb is made.
#
# The build installs relative to its prefix, /usr for the package, so etc/
# and lib/systemd/ land under usr/. Debian keeps the configuration in /etc
# (where packaging/debian/conffiles names it) and, in bookworm, units in
# /lib/systemd/system, as debhelper does. And the packaged tpud.yaml lets the
# group tpud, which the postinst creates, use the socket.
set(root "${CPACK_TEMPORARY_DIRECTORY}")

function(tpud_move from to)
  if(EXISTS "${root}/${from}")
    get_filename_component(parent "${root}/${to}" DIRECTORY)
    file(MAKE_DIRECTORY "${parent}")
    file(RENAME "${root}/${from}" "${root}/${to}")
  endif()
endfunction()

tpud_move(usr/etc/tpud etc/tpud)
tpud_move(usr/lib/systemd/system lib/systemd/system)
foreach(dir usr/etc usr/lib/systemd usr/lib)
  file(GLOB left "${root}/${dir}/*")
  if(IS_DIRECTORY "${root}/${dir}" AND NOT left)
    file(REMOVE_RECURSE "${root}/${dir}")
  endif()
endforeach()

set(config "${root}/etc/tpud/tpud.yaml")
file(READ "${config}" text)
set(default_line "socket_group: \"\"\n")
string(FIND "${text}" "${default_line}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "debian-layout: ${config} has no line ${default_line}: config/tpud.yaml changed?")
endif()
string(REPLACE "${default_line}" "socket_group: tpud   # The Debian package's: its postinst creates the group.\n"
       text "${text}")
file(WRITE "${config}" "${text}")
message(STATUS "debian-layout: /etc/tpud, /lib/systemd/system, socket_group: tpud")
